"""The NumPy 2 shim for nes-py 8.2.1: the same values NumPy 1 gave, no overflow, no warning."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("gym_super_mario_bros", reason="the mario extra is not installed")

from workers.mario import compat


def test_the_patches_are_installed() -> None:
    env_class = compat.smb_env_class()
    import nes_py._rom

    assert env_class._x_position.fget is compat._x_position
    assert env_class._y_position.fget is compat._y_position
    assert nes_py._rom.ROM.header.fget is compat._header


def test_rom_sizes() -> None:
    compat.smb_env_class()
    from gym_super_mario_bros._roms import rom_path
    from nes_py._rom import ROM

    rom = ROM(rom_path(False, "vanilla"))
    # Super Mario Bros: 2 x 16 KiB of program, 8 KiB of graphics, mapper 0 (NROM).
    assert (rom.prg_rom_size, rom.chr_rom_size, rom.mapper) == (32, 8, 0)
    assert len(rom.prg_rom) == 32 * 1024 and len(rom.chr_rom) == 8 * 1024
    assert rom.prg_rom_stop == 16 + 32 * 1024


def test_positions_are_numpy_1s_values_for_every_byte() -> None:
    ram = np.zeros(0x800, dtype=np.uint8)
    env = SimpleNamespace(ram=ram)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the shim must not warn
        for page in range(256):
            ram[0x6D], ram[0x86] = page, 255 - page
            assert compat._x_position(env) == page * 256 + 255 - page  # NumPy 1: uint16
        for viewport in (0, 1, 2):
            for y in range(256):
                ram[0xB5], ram[0x3B8] = viewport, y
                # NumPy 1 and 2 alike computed the env's formula in uint8 (wrapping).
                with np.errstate(over="ignore"):
                    pixel = np.uint8(y)
                    expected = 255 + (255 - pixel) if viewport < 1 else 255 - pixel
                assert compat._y_position(env) == expected
