"""The ctypes mirror (moejit/_abi.py) against the C header: struct sizes and field offsets from
a C program compiled at test time, and the exported functions against the header's."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import moejit
from moejit import _abi

PACKAGE_HEADER = os.path.join(os.path.dirname(moejit.__file__), "include", "moejit.h")
SOURCE_HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "include", "moejit.h")
HEADERS = [h for h in (PACKAGE_HEADER, SOURCE_HEADER) if os.path.exists(h)]
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def c_layout(header, tmp_path):
    """{struct: (sizeof, {field: offsetof})} as the C compiler lays them out."""
    lines = ["#include <stdio.h>", "#include <stddef.h>", f'#include "{os.path.abspath(header)}"',
             "int main(void) {"]
    for name, cls in _abi.STRUCTS.items():
        lines.append(f'printf("{name} size %zu\\n", sizeof({name}));')
        for field, _ in cls._fields_:
            lines.append(f'printf("{name} {field} %zu\\n", offsetof({name}, {field}));')
    lines += ["return 0; }"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([CC, "-std=c11", "-o", str(exe), str(src)], check=True)
    out = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        struct, field, value = line.split()
        size, fields = out.setdefault(struct, [None, {}])
        if field == "size":
            out[struct][0] = int(value)
        else:
            fields[field] = int(value)
    return out


@pytest.mark.skipif(not CC, reason="no C compiler")
@pytest.mark.parametrize("header", HEADERS)
def test_struct_layouts_match_header(header, tmp_path):
    layout = c_layout(header, tmp_path)
    for name, cls in _abi.STRUCTS.items():
        size, offsets = layout[name]
        assert ctypes.sizeof(cls) == size, f"{name}: ctypes size {ctypes.sizeof(cls)}, C {size}"
        for field, _ in cls._fields_:
            assert getattr(cls, field).offset == offsets[field], f"{name}.{field}"


def _header_structs(text):
    """{struct: [field names]} of the header's typedef structs with a body."""
    out = {}
    for m in re.finditer(r"typedef struct (\w+) \{(.*?)\} \1;", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", m.group(2), flags=re.S)
        fields = []
        for decl in body.split(";"):
            decl = decl.strip()
            if not decl:
                continue
            first, *more = decl.split(",")  # "size_t done, total"
            fields.append(re.match(r".*?(\w+)\s*(\[\s*\w+\s*\])?$", first, re.S).group(1))
            fields += [m.strip(" *") for m in more]
        out[m.group(1)] = fields
    return out


@pytest.mark.parametrize("header", HEADERS)
def test_every_header_field_is_mirrored_in_order(header):
    structs = _header_structs(open(header).read())
    assert set(structs) == set(_abi.STRUCTS), "structs with a body in the header"
    for name, fields in structs.items():
        assert [f for f, _ in _abi.STRUCTS[name]._fields_] == fields, name


@pytest.mark.parametrize("header", HEADERS)
def test_every_header_function_has_a_prototype(header):
    text = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
    declared = set(re.findall(r"MOEJIT_API[^;(]*?\b(moejit_\w+)\s*\(", text))
    assert declared, "no MOEJIT_API declarations found"
    missing = declared - set(_abi.PROTOTYPES)
    assert not missing, f"functions of {header} without a ctypes prototype: {sorted(missing)}"


def test_prototypes_are_exported():
    lib = moejit._lib_handle()
    absent = [n for n in _abi.PROTOTYPES if not hasattr(lib, n)]
    assert not absent


def test_status_and_kind_numbers_match_header():
    text = open(HEADERS[0]).read()
    for name, value in re.findall(r"MOEJIT_(ERR_\w+|OK|ACT_\w+)\s*=\s*(\d+)", text):
        assert getattr(_abi, name) == int(value), name
