"""Cached machine code loaded without LLVM: ELF object files mapped and relocated here.

A warm start needs no compiler: every module's machine code is on disk. Loading it
through MCJIT means loading LLVM itself (llvmlite's binding: tens of milliseconds, a
third of a warm first gradient). The objects the engine writes are simple: x86-64
ELF relocatable files of the large code model, whose code and constants refer to
each other and to outside functions through absolute 64-bit addresses
(``R_X86_64_64``) and PC-relative ones inside an object. ``load`` maps a batch of
them: each object's allocated sections are copied into one fresh mapping (code and
constants, then its writable data in a second one), symbols are resolved (the batch's
own, then ``resolve``), relocations applied, and the code mapping made read-only and
executable. Anything else (another architecture or object format, a relocation or
symbol kind not listed here) raises ``Unloadable`` before any code is mapped, and the
engine loads that batch through MCJIT as before.

Unwind tables (``.eh_frame``) are not loaded: nothing unwinds through generated
code (errors leave it by return codes or ``longjmp``). With ``FUSEGRAD_PERF_MAP`` set,
every function loaded is named in ``/tmp/perf-<pid>.map`` for Linux ``perf``.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import struct
import sys

from ... import config

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
_SHF_WRITE, _SHF_ALLOC, _SHF_EXEC = 0x1, 0x2, 0x4
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_UNWIND = 2, 4, 8, 0x70000001
_SHN_UNDEF, _SHN_ABS, _SHN_LORESERVE = 0, 0xFFF1, 0xFF00
_STB_LOCAL, _STT_FUNC, _STT_SECTION = 0, 2, 3
_R_64, _R_PC32, _R_PLT32, _R_PC64 = 1, 2, 4, 24
_PAGE = mmap.PAGESIZE


class Unloadable(Exception):
    """An object this loader does not take (MCJIT loads it instead)."""


def supported() -> bool:
    """Whether this platform's objects are ones ``load`` takes."""
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


class _Object:
    """One object file, parsed: its allocated sections, symbols and relocations."""

    def __init__(self, data: bytes):
        (ident, etype, machine, _, _, _, shoff, _, _, _, _, _, shnum,
         _) = _EHDR.unpack_from(data)
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1 or etype != 1 \
                or machine != 62:
            raise Unloadable("not an x86-64 ELF relocatable object")
        self.data = data
        self.sections = [_SHDR.unpack_from(data, shoff + i * _SHDR.size) for i in range(shnum)]
        self.base: dict[int, int] = {}  # section index -> its address once mapped
        self.symbols: list[tuple] = []
        for sh in self.sections:
            if sh[1] == _SHT_SYMTAB:
                strtab = self.sections[sh[6]]
                self.symbols = [self._symbol(data, sh[4] + i * _SYM.size, strtab[4])
                                for i in range(sh[5] // _SYM.size)]

    @staticmethod
    def _symbol(data, at, names):
        name_at, info, _, shndx, value, size = _SYM.unpack_from(data, at)
        end = data.index(b"\0", names + name_at)
        return data[names + name_at:end].decode(), info >> 4, info & 0xF, shndx, value, size

    def allocated(self, writable: bool) -> list[int]:
        """Indices of the sections mapped (code and constants, or writable data)."""
        return [i for i, sh in enumerate(self.sections)
                if sh[2] & _SHF_ALLOC and sh[1] != _SHT_UNWIND and sh[5]
                and bool(sh[2] & _SHF_WRITE) == writable]

    def layout(self, indices: list[int]) -> tuple[dict[int, int], int]:
        """Offsets of sections ``indices`` in one mapping, and its size."""
        offsets, end = {}, 0
        for i in indices:
            align = max(self.sections[i][8], 1)
            end = (end + align - 1) // align * align
            offsets[i] = end
            end += self.sections[i][5]
        return offsets, end

    def exports(self) -> dict[str, int]:
        out = {}
        for name, bind, _, shndx, value, _ in self.symbols:
            if bind != _STB_LOCAL and name and shndx != _SHN_UNDEF:
                out[name] = self._defined(shndx, value)
        return out

    def _defined(self, shndx: int, value: int) -> int:
        if shndx == _SHN_ABS:
            return value
        if shndx >= _SHN_LORESERVE or shndx not in self.base:
            raise Unloadable(f"a symbol in section {shndx:#x}, which is not loaded")
        return self.base[shndx] + value

    def relocations(self):
        """``(target section, offset, type, symbol index, addend)`` of every relocation
        of a loaded section."""
        for sh in self.sections:
            if sh[1] != _SHT_RELA or sh[7] not in self.base:
                continue
            for k in range(sh[5] // _RELA.size):
                offset, info, addend = _RELA.unpack_from(self.data, sh[4] + k * _RELA.size)
                yield sh[7], offset, info & 0xFFFFFFFF, info >> 32, addend


def _map(size: int) -> tuple[mmap.mmap, int]:
    m = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return m, ctypes.addressof(ctypes.c_char.from_buffer(m))


_mprotect = None


def _protect(address: int, size: int) -> None:
    global _mprotect
    if _mprotect is None:
        libc = ctypes.CDLL(None, use_errno=True)
        _mprotect = libc.mprotect
        _mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rounded = (size + _PAGE - 1) // _PAGE * _PAGE
    if _mprotect(address, rounded, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
        # (a system that forbids it: MCJIT's own allocator may still be allowed)
        raise Unloadable(f"mprotect of loaded machine code failed (errno {ctypes.get_errno()})")


#: the mappings of every object loaded (never unmapped: their code stays callable)
_kept: list[mmap.mmap] = []


def load(objects: list[bytes], resolve) -> dict[str, int]:
    """Map and relocate ``objects`` together; return the addresses of their global
    symbols. ``resolve(name)`` gives the address of a symbol none of them defines (0 or
    None: unknown, ``Unloadable``). Nothing is mapped unless every object parses."""
    parsed = [_Object(d) for d in objects]
    plans = []
    for o in parsed:
        code, data = o.allocated(False), o.allocated(True)
        plans.append((o, code, data, *o.layout(code), *o.layout(data)))
    maps = []
    for o, code, data, code_at, code_size, data_at, data_size in plans:
        for indices, offsets, size in ((code, code_at, code_size), (data, data_at, data_size)):
            if not indices:
                continue
            m, address = _map(size)
            maps.append((m, address, size, indices is code))
            for i in indices:
                o.base[i] = address + offsets[i]
                sh = o.sections[i]
                if sh[1] != _SHT_NOBITS:
                    ctypes.memmove(o.base[i], o.data[sh[4]:sh[4] + sh[5]], sh[5])
    exports: dict[str, int] = {}
    for o in parsed:
        exports.update(o.exports())
    for o in parsed:
        _relocate(o, exports, resolve)
    if config.PERF_MAP:
        _perf_map(parsed)
    for m, address, size, is_code in maps:
        if is_code:
            _protect(address, size)
        _kept.append(m)
    return exports


def _perf_map(parsed: list[_Object]) -> None:
    """Append the loaded functions to ``/tmp/perf-<pid>.map`` ("start size name")."""
    with open(f"/tmp/perf-{os.getpid()}.map", "a") as out:
        for o in parsed:
            for name, _, stype, shndx, value, size in o.symbols:
                if stype == _STT_FUNC and size and shndx in o.base:
                    out.write(f"{o.base[shndx] + value:x} {size:x} {name}\n")


def _relocate(o: _Object, exports: dict[str, int], resolve) -> None:
    known: dict[int, int] = {}
    for section, offset, kind, sym, addend in o.relocations():
        s = known.get(sym)
        if s is None:
            name, _, stype, shndx, value, _ = o.symbols[sym]
            if shndx != _SHN_UNDEF:
                s = o._defined(shndx, 0 if stype == _STT_SECTION else value)
            else:
                s = exports.get(name) or resolve(name)
                if not s:
                    raise Unloadable(f"symbol {name!r} is not defined anywhere")
            known[sym] = s
        at = o.base[section] + offset
        if kind == _R_64:
            ctypes.c_uint64.from_address(at).value = (s + addend) & (2**64 - 1)
        elif kind == _R_PC64:
            ctypes.c_uint64.from_address(at).value = (s + addend - at) & (2**64 - 1)
        elif kind in (_R_PC32, _R_PLT32):
            delta = s + addend - at
            if not -(2**31) <= delta < 2**31:
                raise Unloadable("a 32-bit PC-relative reference out of range")
            ctypes.c_int32.from_address(at).value = delta
        else:
            raise Unloadable(f"relocation type {kind}")
