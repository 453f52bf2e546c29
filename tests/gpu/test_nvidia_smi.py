"""hostside/nvidia_smi.py on the recorded outputs: every field the GPU checks read."""

from __future__ import annotations

import pytest

from hostside import nvidia_smi
from hostside.step import HostError
from tests.gpu.fixtures import text

H100_UUIDS = [
    "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa", "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00",
    "GPU-167d8376-ee13-fca4-938a-a05167c43cdc", "GPU-afe9f2ed-9dd0-572c-3cd8-b42b58b3bc99",
    "GPU-2b6f61f9-8b00-3b57-d912-b62792120662", "GPU-980ea11b-91dc-db7b-72ac-0685abc43658",
    "GPU-4ef109e9-e925-4834-2b85-0771b4ef696c", "GPU-b0fe4996-1f7c-91f6-0ccd-08ae3b7e23c5",
]


def test_the_idle_h100s_as_the_gpu_query_reads_them():
    rows = nvidia_smi.parse_gpus(text("h100-idle", "query-gpu.csv"))
    assert [r.index for r in rows] == list(range(8))
    assert [r.uuid for r in rows] == H100_UUIDS
    first = rows[0]
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.pci_bus_id == "00000000:19:00.0"
    assert (first.memory_total_mib, first.memory_used_mib) == (81559, 0)
    assert first.driver_version == "535.161.08"
    assert (first.mig_mode, first.compute_mode, first.ecc_mode) == ("Disabled", "Default",
                                                                     "Enabled")
    assert first.ecc_uncorrected_volatile == 0
    # Hopper retires no pages (it remaps rows): nvidia-smi has no value for it.
    assert first.retired_pages_pending is None


def test_the_q_text_gives_cuda_and_row_remapping_per_gpu():
    report = nvidia_smi.parse_query(text("h100-idle", "q.txt"))
    assert (report.driver_version, report.cuda_version) == ("535.161.08", "12.2")
    assert len(report.gpus) == 8
    gpu = report.gpus["00000000:DB:00.0"]
    assert gpu[("GPU UUID",)] == H100_UUIDS[7]
    assert gpu[("Remapped Rows", "Pending")] == "No"
    assert gpu[("Remapped Rows", "Remapping Failure Occurred")] == "No"
    assert gpu[("ECC Errors", "Volatile", "DRAM Uncorrectable")] == "0"
    assert gpu[("FB Memory Usage", "Total")] == "81559 MiB"


def test_the_busy_gpu_names_its_process():
    apps = nvidia_smi.parse_apps(text("h100-busy", "query-compute-apps.csv"))
    assert apps == [nvidia_smi.App(gpu_uuid=H100_UUIDS[0], pid=58130, used_mib=77306,
                                   name="/usr/bin/python")]
    assert nvidia_smi.parse_apps(text("h100-idle", "query-compute-apps.csv")) == []
    rows = nvidia_smi.parse_gpus(text("h100-busy", "query-gpu.csv"))
    assert [r.memory_used_mib for r in rows] == [77312] + [0] * 7


def test_a_process_name_with_a_comma_is_kept_whole():
    line = "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa, 4242, 1024, python3 -c a,b\n"
    assert nvidia_smi.parse_apps(line)[0].name == "python3 -c a,b"


def test_the_list_gives_each_whole_gpu():
    listed = nvidia_smi.parse_list(text("h100-idle", "L.txt"))
    assert [uuid for _, _, uuid in listed] == H100_UUIDS
    # MIG devices under a GPU are not GPUs of their own (`nvidia-smi -L` of an A100 with MIG
    # on, as published in NVIDIA/nvidia-container-toolkit#203).
    mig = ("GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39)\n"
           "  MIG 3g.40gb     Device  0: (UUID: MIG-0929581a-2be6-5dec-bf34-0954c6c529a6)\n"
           "  MIG 3g.40gb     Device  1: (UUID: MIG-3adbed3a-d03d-549f-a016-ba1fd7359f23)\n")
    assert nvidia_smi.parse_list(mig) == [
        (0, "NVIDIA A100 80GB PCIe", "GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39")]


def test_a_query_answered_in_other_columns_is_refused_naming_it():
    with pytest.raises(HostError, match="not 12 columns"):
        nvidia_smi.parse_gpus("0, GPU-x, NVIDIA H100 80GB HBM3\n")


@pytest.mark.parametrize(("gpus", "want"), [
    ("all", [0, 1, 2, 3, 4, 5, 6, 7]), ("2", [0, 1]), ("device=0,3", [0, 3]),
    ('"device=1,2"', [1, 2]), (f"device={H100_UUIDS[5]}", [5]), ("device=9", []),
])
def test_the_gpus_dockers_flag_gives_a_container(gpus, want):
    rows = nvidia_smi.parse_gpus(text("h100-idle", "query-gpu.csv"))
    assert [r.index for r in nvidia_smi.selected(rows, gpus)] == want


def test_bus_ids_compare_whatever_their_domain_width():
    assert nvidia_smi.bus_key("0000:19:00.0") == nvidia_smi.bus_key("00000000:19:00.0")
    assert nvidia_smi.bus_key("00000000:db:00.0") == "00000000:DB:00.0"
