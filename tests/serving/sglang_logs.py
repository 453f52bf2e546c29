"""SGLang's own startup log lines, as published in public SGLang issues and pull requests (the
text after docker's timestamp, verbatim), for the readiness wait's phase tests. Each list says
where it was published; the docker timestamps the tests put before them are the tests' own.
"""

from __future__ import annotations

# A startup, phase by phase: Llama-3.1-8B (sgl-project/sglang#15426, "Before:" log of
# 2025-12-23) up to its weights, then a Gemma-3 startup's KV cache and CUDA graph capture
# (sgl-project/sglang#4826, 2025-03-27), a capture's end (sgl-project/sglang#11830), and the
# lines every SGLang server prints once it serves (uvicorn's, and http_server.py's last).
STARTUP = [
    "[2025-12-23 14:17:57] Using default HuggingFace chat template with detected content "
    "format: string",
    "[2025-12-23 14:18:00] Init torch distributed begin.",
    "[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0",
    "[2025-12-23 14:18:00] Init torch distributed ends. mem usage=0.00 GB",
    "[2025-12-23 14:18:01] Load weight begin. avail mem=46.81 GB",
    "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:01,  2.32it/s]",
    "[2025-03-27 21:33:30 TP0] Load weight end. type=Gemma3ForConditionalGeneration, "
    "dtype=torch.bfloat16, avail mem=131.08 GB, mem usage=8.13 GB.",
    "[2025-03-27 21:33:31 TP0] KV Cache is allocated. #tokens: 834615, K size: 54.12 GB, "
    "V size: 54.12 GB",
    "[2025-03-27 21:33:31 TP0] Memory pool end. avail mem=14.61 GB",
    "[2025-03-27 21:33:31 TP0] Capture cuda graph begin. This can take up to several minutes. "
    "avail mem=13.95 GB",
    "[2025-11-30 12:50:15] Capture cuda graph end. Time elapsed: 5.37 s. mem usage=1.44 GB. "
    "avail mem=38.05 GB.",
    "INFO:     Started server process [1]",
    "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    "[2025-12-23 14:18:30] The server is fired up and ready to roll!",
]

# Out of memory while capturing CUDA graphs (sgl-project/sglang#5285, 8 x H20, 2025-04).
OOM_IN_CAPTURE = [
    "[2025-03-27 21:33:31 TP0] Capture cuda graph begin. This can take up to several minutes. "
    "avail mem=13.95 GB",
    "Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", '
    "line 269, in __init__",
    "    raise Exception(",
    "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. "
    "GPU 7 has a total capacity of 95.00",
]

# NCCL failing as the TP group forms (sgl-project/sglang#4289, 2025-03-11).
NCCL_AT_INIT = [
    "[2025-12-23 14:18:00] Init torch distributed begin.",
    '    raise RuntimeError(f"NCCL error: {error_str}")',
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "[2025-03-11 15:02:53] Received sigquit from a child process. It usually means the child "
    "failed.",
]
