#!/usr/bin/env bash
# A real one-node Kubernetes (v1.34, built by build.sh) for the k8s tests, all on loopback:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a containerd of its own (own
# socket, root and state: never the Docker engine's) and a kubelet named `localhost`, with a CNI
# bridge of its own (no gateway, no masquerade: the pods reach nothing and nothing is routed).
#
#   cluster.sh start    idempotent: starts what is not running, waits until the node is Ready and
#                       the default service account exists; prints one status line
#   cluster.sh stop     kills by PID files (TERM, then KILL), removes the pods' sandboxes, then
#                       undoes on the host what the cluster did (hoststate.py restore): mounts,
#                       the bridge and veths, network namespaces, KUBE-*/CNI-* chains, the
#                       kubelet's sysctls and cgroups; the Docker engine and docker0 are not touched
#   cluster.sh status   exit 0 when the apiserver answers and the node is Ready (prints the line)
#
# Failures: one line on stderr; the components' logs are under $STATE/logs.
# Inputs (environment, with defaults; those not given here are setup/defaults.env's):
#   BENCHSTACK_K8S_DIR          builds and the admin kubeconfig
#   BENCHSTACK_K8S_STATE        the cluster's files and logs      ($BENCHSTACK_K8S_DIR/cluster)
#   BENCHSTACK_K8S_RUN          sockets and runtime state (tmpfs) (/run/benchstack-k8s)
#   BENCHSTACK_K8S_API_PORT     kube-apiserver on 127.0.0.1       (16443)
#   BENCHSTACK_K8S_ETCD_PORT    etcd clients on 127.0.0.1 (peers: +1) (12379)
#   BENCHSTACK_K8S_KUBELET_PORT kubelet on 127.0.0.1 (healthz: -2) (10250)
#   BENCHSTACK_K8S_POD_SUBNET   the pods' addresses
#   BENCHSTACK_K8S_SERVICE_SUBNET  service addresses (none routed) (10.251.0.0/24)
#   BENCHSTACK_K8S_BRIDGE       the CNI bridge's name
#   BENCHSTACK_REGISTRY         plain-HTTP registry pods pull from
#   BENCHSTACK_K8S_WAIT         seconds to wait for each stage    (120)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=setup/lib.sh
source "$HERE/../lib.sh"
load_defaults
K8S_DIR=$BENCHSTACK_K8S_DIR
STATE=${BENCHSTACK_K8S_STATE:-$K8S_DIR/cluster}
RUN=${BENCHSTACK_K8S_RUN:-/run/benchstack-k8s}
API_PORT=${BENCHSTACK_K8S_API_PORT:-16443}
ETCD_PORT=${BENCHSTACK_K8S_ETCD_PORT:-12379}
KUBELET_PORT=${BENCHSTACK_K8S_KUBELET_PORT:-10250}
POD_SUBNET=$BENCHSTACK_K8S_POD_SUBNET
SERVICE_SUBNET=${BENCHSTACK_K8S_SERVICE_SUBNET:-10.251.0.0/24}
BRIDGE=$BENCHSTACK_K8S_BRIDGE
REGISTRY=$BENCHSTACK_REGISTRY
WAIT=${BENCHSTACK_K8S_WAIT:-120}

KUBECONFIG_ADMIN=$K8S_DIR/admin.kubeconfig
PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
SNAPSHOT=$STATE/host-before.json
CONTAINERD_SOCK=$RUN/containerd.sock
NODE=localhost
# Stop order (start is the reverse): the kubelet first, so that nothing restarts a pod.
COMPONENTS=(kubelet kube-scheduler kube-controller-manager kube-apiserver containerd etcd)

die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }
log() { printf '[k8s] %s\n' "$*" >&2; }

export BENCHSTACK_K8S_BRIDGE=$BRIDGE BENCHSTACK_K8S_OWNED="$STATE:$RUN"
hoststate() { python3 "$HERE/hoststate.py" "$@"; }

# --- processes, by PID file -------------------------------------------------------------------
pid_of() {
  local name=$1 pid
  pid=$(cat "$PIDS/$name.pid" 2>/dev/null) || return 1
  [[ -n "$pid" && -r /proc/$pid/cmdline ]] || return 1
  # The PID is ours only while it still runs the binary it was started as (no reuse): its first
  # argument is that path exactly (a substring would also take the Docker engine's containerd
  # shims, /usr/bin/containerd-shim-runc-v2, for the cluster's containerd).
  [[ "$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n1)" == "$(cat "$PIDS/$name.bin")" ]] || return 1
  echo "$pid"
}
alive() { pid_of "$1" >/dev/null; }

launch() {
  local name=$1 bin=$2
  shift 2
  alive "$name" && return 0
  mkdir -p "$LOGS" "$PIDS"
  printf '%s' "$bin" >"$PIDS/$name.bin"
  # From /: the cluster outlives the checkout that started it (a CI clone is deleted after its run).
  (cd / && exec setsid nohup "$bin" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null) &
  echo $! >"$PIDS/$name.pid"
}

# terminate NAME...: SIGTERM to all at once, up to 10 s for them to exit, then SIGKILL.
terminate() {
  local name pid pids=() waited
  for name in "$@"; do
    if pid=$(pid_of "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for waited in $(seq 1 51); do
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && break
      pid=""
    done
    [[ -z "${pid:-}" ]] && break
    if ((waited == 50)); then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
    sleep 0.2
  done
  for name in "$@"; do rm -f "$PIDS/$name.pid"; done
}

# until SECONDS_MAX WHAT CMD...: runs CMD until it succeeds; dies naming WHAT and its log.
until_ok() {
  local max=$1 what=$2 log_name=$3 deadline
  shift 3
  deadline=$((SECONDS + max))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "$log_name" ]] && ! alive "$log_name"; then
      die "$what: $log_name exited (last log line: $(tail -n1 "$LOGS/$log_name.log" 2>/dev/null))"
    fi
    ((SECONDS < deadline)) || die "$what not within ${max} s (see $LOGS/${log_name:-cluster}.log)"
    sleep 0.5
  done
}

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" --request-timeout=10s "$@"; }

# --- certificates and kubeconfigs (openssl; made once, kept in $PKI) ---------------------------
cert() {  # cert NAME SUBJECT [SAN]: a client or server certificate signed by the cluster's CA
  local name=$1 subject=$2 san=${3:-} ext
  [[ -s "$PKI/$name.crt" ]] && return 0
  ext=$(mktemp)
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n "$san" ]]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subject" \
    -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$ext" "$PKI/$name.csr"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  if [[ ! -s "$PKI/ca.crt" ]]; then
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -subj "/CN=benchstack-k8s-ca" \
      -days 3650 -sha256 -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "$PKI/ca.crt" 2>/dev/null
  fi
  local service_ip
  service_ip=$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_network(sys.argv[1])[1])' "$SERVICE_SUBNET")
  cert apiserver "/CN=kube-apiserver" \
    "IP:127.0.0.1,IP:$service_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin "/O=system:masters/CN=benchstack-admin"
  cert controller-manager "/CN=system:kube-controller-manager"
  cert scheduler "/CN=system:kube-scheduler"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  if [[ ! -s "$PKI/sa.key" ]]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
}

kubeconfig() {  # kubeconfig CERT FILE
  local name=$1 file=$2
  cat >"$file.tmp" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: benchstack
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$name.crt")
    client-key-data: $(base64 -w0 <"$PKI/$name.key")
contexts:
- name: benchstack
  context: {cluster: benchstack, user: $name}
current-context: benchstack
YAML
  chmod 600 "$file.tmp"
  mv "$file.tmp" "$file"
}

# --- configs ------------------------------------------------------------------------------------
write_configs() {
  mkdir -p "$STATE/containerd/certs.d/$REGISTRY" "$STATE/containerd/certs.d/docker.io" \
    "$STATE/cni/net.d" "$STATE/kubelet"
  # containerd 1.6 (Debian): its own root, state, sockets, runc root; restrict_oom_score_adj
  # because root here lacks CAP_SYS_RESOURCE (runc fails with "can't get final child's PID");
  # the registry by hosts.toml (config_path). The opt plugin (it makes /opt/containerd) and
  # snapshotters other than overlayfs are off.
  cat >"$STATE/containerd/config.toml" <<TOML
version = 2
root = "$STATE/containerd/root"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$STATE/containerd/certs.d"
TOML
  cat >"$STATE/containerd/certs.d/$REGISTRY/hosts.toml" <<TOML
server = "http://$REGISTRY"

[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
TOML
  # The registry as the nodes' mirror of Docker Hub, as a cluster without internet is set up:
  # a task's docker_image like benchstack/minbase:bookworm resolves there. No `server` line:
  # nothing falls through to the Hub itself.
  cat >"$STATE/containerd/certs.d/docker.io/hosts.toml" <<TOML
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
TOML
  # The pods' network: a bridge of its own, no address on it (isGateway false), no masquerade,
  # no route: pods are reached through the kubelet's exec stream only.
  cat >"$STATE/cni/net.d/10-benchstack.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "benchstack-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "dataDir": "$STATE/cni/ipam"
      }
    }
  ]
}
JSON
  # The kubelet: x509 clients of the cluster's CA only, on loopback; no iptables chains; logs and
  # volume plugins under the state dir; image GC off (the pause image is imported, not pulled);
  # eviction only near a full disk (a shared machine).
  cat >"$STATE/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_PORT - 2))
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
imageServiceEndpoint: unix://$CONTAINERD_SOCK
failSwapOn: false
makeIPTablesUtilChains: false
podLogsDir: $STATE/pod-logs
volumePluginDir: $STATE/kubelet/volume-plugins
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
evictionPressureTransitionPeriod: 10s
serializeImagePulls: false
registerNode: true
maxPods: 32
resolvConf: /etc/resolv.conf
YAML
}

# --- start ------------------------------------------------------------------------------------
start() {
  local tool
  for tool in etcd containerd containerd-shim-runc-v2 runc ctr openssl python3 curl ip /usr/lib/cni/bridge; do
    command -v "$tool" >/dev/null || [[ -x "$tool" ]] \
      || die "'$tool' not found: run setup/setup.sh --stack local-k8s (it installs the cluster's Debian packages)"
  done
  BIN=$(bash "$HERE/build.sh") || die "the Kubernetes build failed (see the line above)"
  PAUSE_IMAGE=$(jq -r .pause_image "$K8S_DIR/current/status.json")
  if status >/dev/null 2>&1; then status; return 0; fi
  # An earlier cluster that died without its stop (killed, a machine reused) left its record of
  # the host and what it changed (the bridge, the kubelet's sysctls): undo that first, so this
  # start records the host as it was before any cluster, not as the dead one left it.
  local name any_alive=false
  for name in "${COMPONENTS[@]}"; do alive "$name" && any_alive=true; done
  if [[ "$any_alive" == false && -f "$SNAPSHOT" ]]; then
    log "an earlier cluster was not stopped: restoring the host it recorded first"
    stop
  fi
  local started=$SECONDS
  mkdir -p "$STATE" "$RUN" "$LOGS" "$PIDS"
  # The host as found, before anything of the cluster runs (kept until a stop restores it).
  alive kubelet || alive containerd || hoststate snapshot "$SNAPSHOT" || die "cannot record the host's state"
  make_pki
  if [[ ! -s "$PKI/kubelet-serving.crt" ]]; then cert kubelet-serving "/CN=$NODE" "DNS:$NODE,IP:127.0.0.1"; fi
  kubeconfig admin "$KUBECONFIG_ADMIN"
  kubeconfig controller-manager "$STATE/controller-manager.kubeconfig"
  kubeconfig scheduler "$STATE/scheduler.kubeconfig"
  kubeconfig kubelet "$STATE/kubelet.kubeconfig"
  write_configs

  launch etcd "$(command -v etcd)" --name benchstack --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-cluster "benchstack=http://127.0.0.1:$((ETCD_PORT + 1))" \
    --quota-backend-bytes 2147483648 --log-level warn
  until_ok "$WAIT" "etcd health" etcd curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

  # No endpoint reconciler: the `kubernetes` service would publish 127.0.0.1, which endpoints
  # refuse (no Service traffic is routed here anyway).
  launch kube-apiserver "$BIN/kube-apiserver" --bind-address=127.0.0.1 --secure-port="$API_PORT" \
    --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" --service-cluster-ip-range="$SERVICE_SUBNET" \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" --kubelet-preferred-address-types=Hostname \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction,ResourceQuota \
    --allow-privileged=true --profiling=false --v=1
  until_ok "$WAIT" "kube-apiserver /readyz" kube-apiserver kubectl_admin get --raw /readyz

  launch kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --use-service-account-credentials=true --service-cluster-ip-range="$SERVICE_SUBNET" \
    --flex-volume-plugin-dir="$STATE/kubelet/volume-plugins" \
    --profiling=false --v=1
  launch kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig="$STATE/scheduler.kubeconfig" \
    --authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false --profiling=false --v=1

  launch containerd "$(command -v containerd)" --config "$STATE/containerd/config.toml" --log-level warn
  until_ok "$WAIT" "containerd socket" containerd ctr --address "$CONTAINERD_SOCK" version
  if ! ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls -q | grep -qx "$PAUSE_IMAGE"; then
    ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$K8S_DIR/current/pause.tar" >/dev/null \
      || die "ctr images import $K8S_DIR/current/pause.tar failed"
  fi

  # --hostname-override: the kubelet refuses a loopback node IP; the apiserver reaches it by name.
  launch kubelet "$BIN/kubelet" --config="$STATE/kubelet/config.yaml" \
    --kubeconfig="$STATE/kubelet.kubeconfig" --hostname-override="$NODE" \
    --root-dir="$STATE/kubelet" --cert-dir="$PKI" --v=1
  until_ok "$WAIT" "node $NODE Ready" kubelet node_ready
  until_ok "$WAIT" "the default service account" kube-controller-manager \
    kubectl_admin -n default get serviceaccount default
  log "started in $((SECONDS - started)) s"
  status
}

node_ready() {
  [[ "$(kubectl_admin get node "$NODE" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

status() {
  BIN=${BIN:-$K8S_DIR/current/bin}
  local name down=()
  for name in "${COMPONENTS[@]}"; do alive "$name" || down+=("$name"); done
  if ! kubectl_admin get --raw /readyz >/dev/null 2>&1; then
    echo "cluster: apiserver https://127.0.0.1:$API_PORT not answering${down:+ (down: ${down[*]})}" >&2
    return 1
  fi
  if ! node_ready; then
    echo "cluster: node $NODE not Ready${down:+ (down: ${down[*]})}" >&2
    return 1
  fi
  echo "k8s ready: $("$BIN/kubectl" version --client -o json | jq -r .clientVersion.gitVersion)," \
    "apiserver https://127.0.0.1:$API_PORT, node $NODE Ready, kubeconfig $KUBECONFIG_ADMIN," \
    "containerd $CONTAINERD_SOCK, pods $POD_SUBNET on $BRIDGE${down:+ (down: ${down[*]})}"
}

# --- stop -----------------------------------------------------------------------------------
# The pods go first, through the kubelet (it stops each sandbox: CNI DEL, netns removed); what
# is left is killed through containerd; then the processes; then the host is restored.
stop() {
  BIN=$K8S_DIR/current/bin
  local started=$SECONDS ctr_cmd=(ctr --address "$CONTAINERD_SOCK" -n k8s.io) task
  if alive kube-apiserver && alive kubelet && [[ -x "$BIN/kubectl" ]]; then
    kubectl_admin delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      [[ -z "$("${ctr_cmd[@]}" tasks ls -q 2>/dev/null)" ]] && break
      sleep 0.5
    done
  fi
  terminate kubelet
  if alive containerd; then
    for task in $("${ctr_cmd[@]}" tasks ls -q 2>/dev/null); do
      "${ctr_cmd[@]}" tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
    done
    sleep 1
    for task in $("${ctr_cmd[@]}" tasks ls -q 2>/dev/null); do
      "${ctr_cmd[@]}" tasks delete -f "$task" >/dev/null 2>&1 || true
    done
    for task in $("${ctr_cmd[@]}" containers ls -q 2>/dev/null); do
      "${ctr_cmd[@]}" containers delete "$task" >/dev/null 2>&1 || true
    done
  fi
  # The control plane together, then the runtime, then the store.
  terminate kube-scheduler kube-controller-manager kube-apiserver
  terminate containerd
  terminate etcd
  # The runc shims (one per sandbox) by the PID files containerd keeps in its state dir.
  local pidfile pid
  for pidfile in "$RUN"/containerd/io.containerd.runtime.v2.task/*/*/shim.pid; do
    [[ -f "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    # Only a shim of this cluster's containerd (its socket on the command line): never one of
    # the Docker engine's, whatever PID it was given.
    if [[ -n "$pid" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "containerd-shim.* -address $CONTAINERD_SOCK"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if [[ -f "$SNAPSHOT" ]]; then
    hoststate restore "$SNAPSHOT" >"$LOGS/restore.json" || die "restoring the host failed (see $LOGS/restore.json)"
    rm -f "$SNAPSHOT"
  fi
  # The cluster's data goes (a start is a fresh cluster); the PKI, the containerd image store and
  # the logs stay.
  rm -rf "$STATE/etcd" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/cni/ipam" "$RUN"
  rm -rf "${STATE:?}/containerd/root/io.containerd.grpc.v1.cri/sandboxes" \
    "${STATE:?}/containerd/root/io.containerd.grpc.v1.cri/containers"
  log "stopped in $((SECONDS - started)) s"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: cluster.sh start|stop|status" >&2; exit 2 ;;
esac
