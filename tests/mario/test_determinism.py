"""The same checkpoint gives the same actions on any device (issue 20, item 2): every process
that loads a checkpoint turns TF32 and the other reduced-precision paths off and deterministic
algorithms on, even when the process had them on or the checkpoint's own unpickling turns them
back; the result says where it ran. (cpu against cuda itself: bench/device_equivalence.py, on a
GPU host.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # CI installs the sb3 extra: there these must run
    pytest.importorskip("torch", reason="the sb3 extra is not installed")
    pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
import torch

from tests.mario.sb3_models import build_checkpoint, with_pickle_payload
from tests.needs import require_bwrap
from workers.mario.determinism import determinism_flags
from workers.mario.sb3 import load_checkpoint_agent
from workers.sandbox.agent_sandbox import AgentLimits, AgentSource, untrusted_agent

FULL_PRECISION = {
    "tf32_matmul": False,
    "tf32_cudnn": False,
    "reduced_precision_reduction": False,
    "float32_matmul_precision": "highest",
    "cudnn_benchmark": False,
    "deterministic_algorithms": True,
}
PREPROCESSING = {"grayscale": True, "resize": 84, "frame_stack": 4, "device": "cpu"}


def turn_everything_fast() -> None:
    """What a GPU host's process may hold: cuDNN's TF32 is on by default, the rest asked for."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = False
    torch.use_deterministic_algorithms(False)


@pytest.fixture(autouse=True)
def flags_restored() -> Iterator[None]:
    """The test process's torch as it was before (other tests train on the CPU)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    switches = [
        (matmul, "allow_tf32"),
        (cudnn, "allow_tf32"),
        (cudnn, "benchmark"),
        (cudnn, "deterministic"),
        (matmul, "allow_fp16_reduced_precision_reduction"),
        (matmul, "allow_bf16_reduced_precision_reduction"),
    ]
    saved = [getattr(owner, name) for owner, name in switches]
    precision = torch.get_float32_matmul_precision()
    deterministic = torch.are_deterministic_algorithms_enabled()
    yield
    for (owner, name), value in zip(switches, saved, strict=True):
        setattr(owner, name, value)
    torch.set_float32_matmul_precision(precision)
    torch.use_deterministic_algorithms(deterministic)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("sb3") / "ppo", seed=1)


TF32_BACK_ON = (
    "import torch\n"
    "torch.backends.cudnn.allow_tf32 = True\n"
    "torch.backends.cuda.matmul.allow_tf32 = True\n"
    "torch.backends.cudnn.benchmark = True\n"
    "torch.use_deterministic_algorithms(False)\n"
)  # run by a checkpoint's pickle while SB3 loads it


def test_a_loaded_checkpoint_runs_at_full_precision_whatever_the_process_had(
    checkpoint: Path,
) -> None:
    turn_everything_fast()
    assert determinism_flags(torch) != FULL_PRECISION
    agent = load_checkpoint_agent(str(checkpoint), **PREPROCESSING)
    assert determinism_flags(torch) == FULL_PRECISION
    runtime = agent.runtime
    assert runtime["device"] == "cpu" and runtime["gpu"] is None
    assert runtime["torch"] == torch.__version__ and runtime["cuda"] == torch.version.cuda
    assert {k: runtime[k] for k in FULL_PRECISION} == FULL_PRECISION


def test_a_checkpoint_that_turns_tf32_back_on_while_loading_is_overruled(
    checkpoint: Path, tmp_path: Path
) -> None:
    fast = with_pickle_payload(checkpoint, tmp_path / "fast.zip", TF32_BACK_ON)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    from stable_baselines3 import PPO

    PPO.load(fast, device="cpu")  # the payload runs: loading alone turns them on
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cudnn.benchmark
    load_checkpoint_agent(str(fast), **PREPROCESSING)
    assert determinism_flags(torch) == FULL_PRECISION


def test_a_sandboxed_checkpoint_says_where_it_ran_and_how(checkpoint: Path) -> None:
    """The jail's process is the one that runs the checkpoint: its own flags come back."""
    require_bwrap()
    source = AgentSource(checkpoint=str(checkpoint))
    limits = AgentLimits(memory_mb=2048, start_timeout_s=120)
    with untrusted_agent(source, None, limits, step_timeout_s=30) as agent:
        runtime = agent.runtime
    assert runtime is not None
    assert runtime["device"] == "cpu" and runtime["torch"] == torch.__version__
    assert {k: runtime[k] for k in FULL_PRECISION} == FULL_PRECISION


def test_an_entry_points_claim_of_a_runtime_is_not_passed_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only Arena's checkpoint loader reports a runtime: an entry point's attribute of that name
    is its own and never reaches the result."""
    require_bwrap()
    package = tmp_path / "claims_gpu"
    package.mkdir()
    (package / "__init__.py").write_text(
        "class Agent:\n"
        "    runtime = {'device': 'cuda', 'tf32_cudnn': False}\n"
        "    def reset(self, **context): pass\n"
        "    def act(self, observation): return 0\n"
    )
    source = AgentSource(entry_point="claims_gpu:Agent")
    limits = AgentLimits(memory_mb=512, start_timeout_s=60)
    monkeypatch.chdir(tmp_path)  # the agent's package is found from the working directory
    with untrusted_agent(source, None, limits, step_timeout_s=10) as agent:
        assert agent.runtime is None
