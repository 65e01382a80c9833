"""Loading the emulator: nes-py 8.2.1 under NumPy 2, and gym's import notice kept off stderr.

nes-py 8.2.1 does byte arithmetic on NumPy uint8 scalars. NumPy 1 promoted `uint8 * 1024` to a
wider type by value; NumPy 2 (NEP 50) keeps uint8 and raises OverflowError instead. Two places
are on our path:

- `nes_py._rom.ROM`: the header sizes (`16 * header[4] * 2**10`) fail when the env is built;
- `SuperMarioBrosEnv._x_position` (`ram[0x6d] * 0x100 + ram[0x86]`) fails in every `step`/info.

Both are replaced by the same formulas over Python ints, which give the values NumPy 1 gave
(the sizes fit, and x fits the uint16 NumPy 1 produced). The patch is applied under NumPy 1 too,
so both give identical results; tests/mario/test_compat.py checks the formulas.
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any

_patched = False


def import_gym_quietly() -> None:
    """Import gym, when installed, with its "unmaintained" notice kept off stderr (it would
    open the log of the unit whose process imports it first: Stable-Baselines3 imports gym when
    present). Anything else printed on import is passed on."""
    if "gym" in sys.modules:
        return
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed), contextlib.suppress(ImportError):
        import gym  # noqa: F401
    text = printed.getvalue()
    with contextlib.suppress(ImportError, AttributeError):
        from gym_notices.notices import notices  # type: ignore[import-untyped]

        for notice in set(notices.values()):
            text = text.replace(notice + "\n", "")
    if text.strip():
        sys.stderr.write(text)


def _header(rom: Any) -> Any:
    # The 16 header bytes as int64: every size computed from them is then exact.
    return rom.raw_data[:16].astype("int64")


def _x_position(env: Any) -> int:
    ram = env.ram
    return int(ram[0x6D]) * 0x100 + int(ram[0x86])


def _y_position(env: Any) -> int:
    # The env's formula wraps to a byte (`255 + (255 - y)` in uint8) under NumPy 1 and 2 alike,
    # warning each time; the same byte, computed without the warning.
    ram = env.ram
    y = int(ram[0x03B8])
    return (255 + (255 - y)) & 0xFF if ram[0x00B5] < 1 else 255 - y


def smb_env_class() -> Any:
    """gym_super_mario_bros.SuperMarioBrosEnv, patched for NumPy 2 (idempotent)."""
    global _patched
    # gym 0.26 prints an "unmaintained" notice to stderr on import: it would land in every
    # unit's captured log. We drive nes-py directly and need none of gym's machinery.
    import_gym_quietly()
    with contextlib.redirect_stderr(io.StringIO()):  # here: the emulator (the mario extra)
        import gym_super_mario_bros
        import nes_py._rom
    if not _patched:
        nes_py._rom.ROM.header = property(_header)
        env_class = gym_super_mario_bros.SuperMarioBrosEnv
        env_class._x_position = property(_x_position)
        env_class._y_position = property(_y_position)
        _patched = True
    return gym_super_mario_bros.SuperMarioBrosEnv


def emulator_step() -> Any:
    """nes-py's `_LIB.Step(handle)`: one emulator frame (what `env._frame_advance` calls)."""
    smb_env_class()
    from nes_py.nes_env import _LIB  # here: the emulator (the mario extra), once patched

    return _LIB.Step
