"""The seccomp filter a unit child of the agent sandbox installs on itself before any of the
agent's code runs (workers/agent_child.py): threads yes, processes no (a fork bomb has nothing
to multiply), and nothing that would outlive the unit in the jail (SysV IPC objects, POSIX
message queues). Standard library only: it runs in the jail before NumPy is imported."""

from __future__ import annotations

import ctypes
import platform

# Seccomp (the kernel's struct seccomp_data, little-endian): the fields the filter reads.
_ARCH, _NR, _ARG0 = 4, 0, 16
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
# Per architecture: (AUDIT_ARCH, clone, clone3, system calls that only make processes, system
# calls that make what would outlive the unit in the jail: SysV shared memory, semaphores and
# message queues, POSIX message queues).
_SYSCALLS = {
    "x86_64": (0xC000003E, 56, 435, (57, 58), (29, 64, 68, 240)),  # fork, vfork; shmget ...
    "aarch64": (0xC00000B7, 220, 435, (), (194, 190, 186, 180)),
}


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def process_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """A classic-BPF seccomp program that refuses to make processes: clone without CLONE_THREAD,
    fork and vfork fail with EPERM, clone3 with ENOSYS (glibc then creates threads with clone,
    whose flags the filter can read); a system call of another ABI (32-bit, x32) fails too, and
    so do the IPC objects that would outlive the unit's process (shmget, semget, msgget,
    mq_open: a channel to the agent's next unit)."""
    arch, clone, clone3, forks, ipc = _SYSCALLS[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    body: list[tuple[str, int, str | int, str | int]] = [
        ("ld", _ARCH, 0, 0),
        ("jeq", arch, 0, "deny"),
        ("ld", _NR, 0, 0),
        ("jge", _X32_BIT, "deny", 0),
        *[("jeq", nr, "deny", 0) for nr in (*forks, *ipc)],
        ("jeq", clone3, "nosys", 0),
        ("jeq", clone, 0, "allow"),
        ("ld", _ARG0, 0, 0),
        ("jset", _CLONE_THREAD, "allow", "deny"),
    ]
    labels = {"allow": len(body), "deny": len(body) + 1, "nosys": len(body) + 2}
    codes = {"ld": ld, "jeq": jeq, "jge": jge, "jset": jset}
    program = []
    for pc, (op, k, jt, jf) in enumerate(body):
        offsets = [labels[j] - pc - 1 if isinstance(j, str) else j for j in (jt, jf)]
        program.append((codes[op], offsets[0], offsets[1], k))
    program += [
        (ret, 0, 0, _RET_ALLOW),
        (ret, 0, 0, _RET_ERRNO | _EPERM),
        (ret, 0, 0, _RET_ERRNO | _ENOSYS),
    ]
    return program


def forbid_processes() -> None:
    """Install process_filter on this process (and what it starts): no way back."""
    machine = platform.machine()
    if machine not in _SYSCALLS:
        raise OSError(f"no process filter for the {machine} architecture")
    instructions = process_filter(machine)
    array = (_Filter * len(instructions))(*(_Filter(*i) for i in instructions))
    program = _Program(len(instructions), array)
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
