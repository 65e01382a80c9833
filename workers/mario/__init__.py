"""Super Mario Bros episodes on the real emulator (gym-super-mario-bros on nes-py).

`protocol` needs no emulator; `runner` and `emulator` need the `mario` extra. docs/mario.md.
"""
