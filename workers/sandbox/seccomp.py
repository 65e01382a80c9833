"""System calls untrusted code never needs, refused by a seccomp filter: one list, two uses.

- In a bubblewrap jail (`--seccomp FD`): `jail_filter()` compiles JAIL_DENIED (every system
  call of the kernel's attack surface that a build, a test run or an agent has no use for, and
  everything that would let the jailed process make a namespace, mount or trace of its own)
  to BPF with libseccomp, as Flatpak does for its sandboxes. A denied call fails with EPERM
  (ENOSYS for clone3, so the C library falls back to clone, where the flags can be checked);
  a system call of another architecture (32-bit calls on x86_64) kills the process.
- For a worker container (compose, Kubernetes): `worker_profile()` is a Docker/OCI seccomp
  profile that allows by default and refuses WORKER_DENIED. The engine's default profile refuses
  the namespaces and mounts bubblewrap needs; this one lets the worker make its jails while
  still closing what neither the worker nor a jail uses (deploy/seccomp/arena-worker.json is
  this profile, a test keeps them equal).

libseccomp (`libseccomp.so.2`, on every Debian and in the worker image) is called through
ctypes: five functions, no binding package. `jail_filter()` returns None where it is missing;
callers then run the jail without a filter of its own (namespaces still apply) and say so.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
from typing import Any

# Neither the worker nor anything in a jail has a use for these.
WORKER_DENIED = (
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "fanotify_init",
    "finit_module",
    "get_kernel_syms",
    "init_module",
    "ioperm",
    "iopl",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "nfsservctl",
    "open_by_handle_at",
    "perf_event_open",
    "query_module",
    "quotactl",
    "reboot",
    "request_key",
    "settimeofday",
    "stime",
    "swapoff",
    "swapon",
    "syslog",
    "uselib",
    "userfaultfd",
    "vm86",
    "vm86old",
    "_sysctl",
    "adjtimex",
    "name_to_handle_at",
)
# What the worker needs to make a jail, and nothing in a jail may do: new namespaces, mounts,
# changing root, tracing or reading other processes' memory, io_uring (a large attack surface
# that bypasses seccomp's view of what is done), faking terminal input.
JAIL_ONLY_DENIED = (
    "chroot",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "kcmp",
    "mount",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "pivot_root",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "setns",
    "umount",
    "umount2",
    "unshare",
    "personality",
)
JAIL_DENIED = tuple(sorted({*WORKER_DENIED, *JAIL_ONLY_DENIED}))
# clone(2) with any of these flags makes a namespace: refused in a jail (one rule per flag).
CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
TIOCSTI, TIOCLINUX = 0x5412, 0x541C  # ioctls that push input into a terminal

SCMP_ACT_ALLOW = 0x7FFF0000
EPERM, ENOSYS = 1, 38
SCMP_CMP_MASKED_EQ = 7


def scmp_act_errno(errno: int) -> int:
    return 0x00050000 | (errno & 0xFFFF)


class ArgCompare(ctypes.Structure):
    """libseccomp's `struct scmp_arg_cmp`."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


@functools.lru_cache(maxsize=1)
def _libseccomp() -> Any | None:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCompare),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def jail_filter() -> int | None:
    """A file descriptor holding the jail's BPF filter (for `bwrap --seccomp FD`; the caller
    passes it to bwrap and closes it), or None where libseccomp is missing."""
    lib = _libseccomp()
    if lib is None:
        return None
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        return None
    try:
        for name in JAIL_DENIED:
            _deny(lib, ctx, name, scmp_act_errno(EPERM))
        _deny(lib, ctx, "clone3", scmp_act_errno(ENOSYS))  # glibc then falls back to clone
        for flag in CLONE_NAMESPACE_FLAGS:
            _deny(
                lib,
                ctx,
                "clone",
                scmp_act_errno(EPERM),
                ArgCompare(0, SCMP_CMP_MASKED_EQ, flag, flag),
            )
        for request in (TIOCSTI, TIOCLINUX):
            _deny(
                lib,
                ctx,
                "ioctl",
                scmp_act_errno(EPERM),
                ArgCompare(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, request),
            )
        fd = os.memfd_create("arena-seccomp", 0)  # close-on-exec off: bwrap must inherit it
        if lib.seccomp_export_bpf(ctx, fd) != 0:
            os.close(fd)
            return None
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    finally:
        lib.seccomp_release(ctx)


def _deny(lib: Any, ctx: int, name: str, action: int, *compare: ArgCompare) -> None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:  # not a system call of this architecture (vm86 on x86_64, say)
        return
    array = (ArgCompare * len(compare))(*compare) if compare else None
    status = lib.seccomp_rule_add_array(ctx, action, number, len(compare), array)
    if status != 0:
        raise OSError(-status, f"seccomp: could not add a rule for {name}")


def worker_profile() -> dict[str, Any]:
    """The worker container's seccomp profile (Docker's `--security-opt seccomp=FILE`,
    Kubernetes' `Localhost` profile): allow by default, refuse WORKER_DENIED with EPERM."""
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
        "syscalls": [
            {"names": sorted(WORKER_DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
        ],
    }


def worker_profile_json() -> str:
    return json.dumps(worker_profile(), indent=2) + "\n"
