"""Python str token lists to the text stage's columns, each token's UTF-8 read where CPython keeps it.

Kernel of the minhash token-list path: a batch of rows (a list or tuple of lists or tuples of str) becomes the
column of every token under a `hashing` stage with hash "murmur3", floor(MurmurHash3_x86_32(utf8(token), key)
width / 2^32) (featurehash.maps.numerics._murmur; the stage's own columns bit for bit), in one compiled loop and
no Python object or joined copy of the text per token. A compact ASCII str (what CPython makes of ASCII text) is
hashed where its characters lie in the object; any other token's UTF-8 buffer comes from the public C API,
PyUnicode_AsUTF8AndSize (an encoding CPython makes once and keeps), which also refuses what is not a str.

Invariants: each call of the loop holds the GIL from start to end (it calls the C API, and no other thread can
change or free the objects it reads); it reads a row's items as CPython lays out lists and tuples
(PyObject_HEAD's ob_type, ob_size, then ob_item: a pointer for a list, the items inline for a tuple:
PyList_GET_ITEM's and PyTuple_GET_ITEM's layout) and a compact ASCII str's length, state bits and characters
(PyUnicode_IS_COMPACT_ASCII's and PyUnicode_DATA's), on a little-endian machine, which `AVAILABLE` and
`ASCII_DATA_AT` check on probe objects at import, and which a free-threaded interpreter does not have. Where it
is not available, or a batch, row, token or size is not as expected (a non-str token, text with no UTF-8 form, a
row that changed size), `token_columns` returns None and the caller takes the general path, whose errors name
the row.
"""

from __future__ import annotations

import ctypes
import sys

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ..numerics._murmur import MASK32, block_step, finish

_U = np.uint64
_WORD = 8
_TYPE_AT, _SIZE_AT, _ITEMS_AT = 8, 16, 24   # ob_type, ob_size, ob_item (PyVarObject, then the list's or tuple's)
BLOCK_TOKENS = 1 << 14   # tokens read per call of the compiled loop, which holds the GIL
# A str object (PyASCIIObject): its length at _SIZE_AT, its state bits at _STATE_AT, among them "compact" and
# "ascii" (bits 5 and 6 from CPython 3.11 on), and a compact ASCII string's characters right after the struct
# (48 bytes in 3.11, 40 from 3.12): PyUnicode_IS_COMPACT_ASCII's and PyUnicode_DATA's layout.
_STATE_AT, _COMPACT_ASCII = 32, 0x60
_AHEAD = 8   # tokens between a str object's prefetch and its read
_ASCII_DATA_CANDIDATES = (40, 48)


def _loader(bits: int):
    """An intrinsic: the unsigned word of `bits` bits at an address (no alignment; the machine's byte order,
    which `AVAILABLE` requires to be little-endian, as MurmurHash3 reads its blocks), as uint64."""
    @intrinsic
    def load(typingctx, address):
        def codegen(context, builder, signature, args):
            value = builder.load(builder.inttoptr(args[0], ir.IntType(bits).as_pointer()), align=1)
            return value if bits == 64 else builder.zext(value, ir.IntType(64))

        return types.uint64(types.uint64), codegen

    return load


_load8, _load32, _load64 = _loader(8), _loader(32), _loader(64)


@intrinsic
def _utf8_of(typingctx, function, token, size_address):
    """PyUnicode_AsUTF8AndSize(token, size_address) through its address: the buffer's address, 0 on failure."""
    def codegen(context, builder, signature, args):
        pointer_type = ir.IntType(8).as_pointer()
        call_type = ir.FunctionType(pointer_type, [pointer_type, pointer_type])
        callee = builder.inttoptr(args[0], call_type.as_pointer())
        result = builder.call(callee, [builder.inttoptr(args[1], pointer_type),
                                       builder.inttoptr(args[2], pointer_type)])
        return builder.ptrtoint(result, ir.IntType(64))

    return types.uint64(types.uint64, types.uint64, types.uint64), codegen


@intrinsic
def _call(typingctx, function):
    """A C function of no argument and no result (PyErr_Clear) through its address."""
    def codegen(context, builder, signature, args):
        callee = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), []).as_pointer())
        builder.call(callee, [])
        return context.get_dummy_value()

    return types.none(types.uint64), codegen


@intrinsic
def _prefetch(typingctx, address):
    """A hint to bring the cache line at `address` in for reading (llvm.prefetch; no effect on results)."""
    def codegen(context, builder, signature, args):
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        hint = builder.module.declare_intrinsic("llvm.prefetch", fnty=ir.FunctionType(
            ir.VoidType(), [byte_pointer, i32, i32, i32]))
        builder.call(hint, [builder.inttoptr(args[0], byte_pointer), ir.Constant(i32, 0), ir.Constant(i32, 3),
                            ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.none(types.uint64), codegen


@nb.njit(inline="always")
def _murmur3_at(address, length, key):
    """MurmurHash3_x86_32 of the `length` bytes at `address` (the reference's formula, as `_murmur`). The tail's
    three bytes are read clamped to the last byte (the NUL CPython keeps after an empty token's text) and
    masked off by `finish`: no branch on the tail's length, which mispredicted on tokens of mixed lengths."""
    h1 = key
    blocks_end = address + (length & ~_U(3))
    at = address
    while at < blocks_end:
        h1 = block_step(h1, _load32(at))
        at += _U(4)
    last = address + length - _U(1) if length else address
    tail = (_load8(min(blocks_end, last)) | (_load8(min(blocks_end + _U(1), last)) << _U(8))
            | (_load8(min(blocks_end + _U(2), last)) << _U(16)))
    return finish(h1, tail, length & _U(3), length)


@nb.njit(inline="always")
def _items(sequence, size, list_type, tuple_type):
    """(found, address of the item array) of a list or tuple at `sequence` (an object address); found is False
    when it is neither or does not hold `size` items. An empty list may have no array (address 0)."""
    kind = _load64(sequence + _U(_TYPE_AT))
    if (kind != list_type and kind != tuple_type) or _load64(sequence + _U(_SIZE_AT)) != _U(size):
        return False, _U(0)
    return True, _load64(sequence + _U(_ITEMS_AT)) if kind == list_type else sequence + _U(_ITEMS_AT)


@nb.njit(cache=True)   # not nogil: the GIL is held throughout (module docstring)
def _columns(batch, first, last, offsets, list_type, tuple_type, str_type, ascii_data_at, utf8_of, clear_error,
             key, width, columns, size_slot):
    """columns[offsets[first]:offsets[last]] for the tokens of rows first..last-1 of `batch` (an object address;
    row r holds offsets[r + 1] - offsets[r] tokens), row after row. The
    batch's and each row's items are found in this call (between two calls another thread may have changed
    them). A compact ASCII str's bytes are read in place at `ascii_data_at` (0: never); other tokens through
    PyUnicode_AsUTF8AndSize. Returns False after a batch, row or token not as expected (the error CPython set is
    cleared), else True."""
    size_address = _U(size_slot.ctypes.data)
    key, width = _U(key) & MASK32, _U(width)
    found, rows = _items(batch, offsets.size - 1, list_type, tuple_type)
    if not found:
        return False
    t = offsets[first]
    for r in range(first, last):
        count = offsets[r + 1] - offsets[r]
        found, items = _items(_load64(rows + _U(_WORD * r)), count, list_type, tuple_type)
        if not found:
            return False
        for i in range(count):
            if i + _AHEAD < count:   # a row's str objects lie anywhere in memory: ask for one a few tokens ahead
                _prefetch(_load64(items + _U(_WORD * (i + _AHEAD))))
            token = _load64(items + _U(_WORD * i))
            if ascii_data_at and _load64(token + _U(_TYPE_AT)) == str_type \
                    and _load8(token + _U(_STATE_AT)) & _U(_COMPACT_ASCII) == _U(_COMPACT_ASCII):
                data, length = token + ascii_data_at, _load64(token + _U(_SIZE_AT))
            else:
                data = _utf8_of(utf8_of, token, size_address)
                if data == 0:
                    _call(clear_error)
                    return False
                length = _U(size_slot[0])
            columns[t] = (_murmur3_at(data, length, key) * width) >> _U(32)
            t += 1
    return True


def _address(function) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value


def _word_at(address: int) -> int:
    return ctypes.c_uint64.from_address(address).value


def _items_address(batch) -> int:
    return _word_at(id(batch) + _ITEMS_AT) if type(batch) is list else id(batch) + _ITEMS_AT


def _layout_holds() -> bool:
    """Lists and tuples are laid out as the loop reads them (checked on probes, through ctypes)."""
    if sys.implementation.name != "cpython" or sys.byteorder != "little" \
            or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return False
    first, second = "probe", "probé"
    for probe in ([first, second], (first, second)):
        items = _items_address(probe)
        if _word_at(id(probe) + _TYPE_AT) != id(type(probe)) or _word_at(id(probe) + _SIZE_AT) != 2 \
                or _word_at(items) != id(first) or _word_at(items + _WORD) != id(second):
            return False
    return True


def _ascii_data_at() -> int:
    """Where a compact ASCII str's characters start, when the state bits and the struct size are as the loop
    reads them on probes (ASCII, Latin-1 and a str subclass, whose data lies elsewhere); 0 otherwise."""
    text = "".join(["featurehash layout probe ", str(id(object()))])   # made at run time: not a constant
    state = ctypes.c_uint8.from_address(id(text) + _STATE_AT).value
    latin = "".join(["probé ", str(len(text))])
    if state & _COMPACT_ASCII != _COMPACT_ASCII or _word_at(id(text) + _SIZE_AT) != len(text) \
            or ctypes.c_uint8.from_address(id(latin) + _STATE_AT).value & _COMPACT_ASCII == _COMPACT_ASCII:
        return 0
    found = [at for at in _ASCII_DATA_CANDIDATES if ctypes.string_at(id(text) + at, len(text)) == text.encode()]
    return found[0] if len(found) == 1 else 0


AVAILABLE = _layout_holds()
ASCII_DATA_AT = _ascii_data_at() if AVAILABLE else 0
_UTF8_OF = _address(ctypes.pythonapi.PyUnicode_AsUTF8AndSize) if AVAILABLE else 0
_CLEAR_ERROR = _address(ctypes.pythonapi.PyErr_Clear) if AVAILABLE else 0


def row_blocks(offsets: np.ndarray, block_tokens: int) -> list[tuple[int, int]]:
    """Consecutive row ranges (first, last) of about `block_tokens` tokens each, whole rows a block (a row longer
    than a block alone), for n rows of `offsets` (n + 1 int64)."""
    starts = np.searchsorted(offsets, np.arange(block_tokens, offsets[-1], block_tokens), side="right") - 1
    cuts = np.unique(np.concatenate([[0], starts, [offsets.size - 1]])).tolist()
    return list(zip(cuts[:-1], cuts[1:]))


def token_columns(batch, offsets: np.ndarray, key: int, width: int) -> np.ndarray | None:
    """The stage columns (uint64) of every token of `batch` (a list or tuple of lists or tuples; row r holds
    offsets[r + 1] - offsets[r] tokens, `offsets` int64), row after row: floor(h width / 2^32) of each token's
    hash h (width 2^32: h itself); None where the loop cannot read them (the module docstring). Rows go in
    blocks of about BLOCK_TOKENS tokens, so the GIL is held a fraction of a millisecond at a time."""
    if not AVAILABLE or type(batch) not in (list, tuple):
        return None
    columns = np.empty(int(offsets[-1]), dtype=np.uint64)
    size_slot = np.zeros(1, dtype=np.int64)
    for first, last in row_blocks(offsets, BLOCK_TOKENS):
        if not _columns(_U(id(batch)), first, last, offsets, _U(id(list)), _U(id(tuple)), _U(id(str)),
                        _U(ASCII_DATA_AT), _U(_UTF8_OF), _U(_CLEAR_ERROR), _U(key), _U(width), columns, size_slot):
            return None
    return columns
