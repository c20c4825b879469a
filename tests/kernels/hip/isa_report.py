#!/usr/bin/env python3
"""ISA checks of an AMD class's code object (tests/kernels/hip/isa_check.sh prepares the inputs).

Per kernel: registers (VGPR, AGPR, SGPR), static LDS, scratch and spills from `llvm-readelf
--notes`, and its MFMA instructions from `llvm-objdump -d`. Fails when
  - a kernel uses scratch: a private segment, VGPR spills or a dynamic stack (SGPR spills go to
    VGPR lanes, not memory: reported, not refused);
  - a matrix-core body (its family's unit is tensor_core in the class chain's KERNEL_FAMILIES.toml,
    as the plan says) has no MFMA of the precision its rules declare, or none of the depth its arch
    issues (gfx942: 32x32x8 and 16x16x16 for bf16; gfx950: 32x32x16 and 16x16x32);
  - a vector-ALU body (any other family) contains an MFMA: the plan would cost it on the wrong unit.
Usage: isa_report.py NOTES DISASM KERNELS_TSV KERNELS_DIR DEVICE ARCH
"""
import re
import sys
import tomllib
from pathlib import Path

# MFMA shapes each arch's bf16 bodies issue (cdna3/mfma.hip.hpp): the double-depth forms on gfx950.
BF16_SHAPES = {"gfx942": {"32x32x8", "16x16x16"}, "gfx950": {"32x32x16", "16x16x32"}}
# A rule's math format (what the matrix core multiplies; weights emulated in another format are
# converted first) -> the operand type in the MFMA mnemonic.
FORMAT_OPERAND = {"bf16": "bf16", "fp8-e4m3": "fp8", "fp8-e5m2": "bf8"}


def parse_notes(text):
    kernels, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^  - (\.\w+):\s*(.*)$", line)
        if m and line.startswith("  - "):  # a kernel's first key
            cur = {}
            cur[m.group(1)] = m.group(2).strip()
            continue
        m = re.match(r"^    (\.\w+):\s*(.*)$", line)
        if m and cur is not None:
            cur[m.group(1)] = m.group(2).strip()
            if m.group(1) == ".name":
                kernels[m.group(2).strip()] = cur
        if line.startswith("amdhsa.target"):
            cur = None
    return kernels


def parse_mfma(text):
    counts, fn = {}, None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r"^\s+(v_mfma\w*)", line)
        if m and fn:
            counts.setdefault(fn, {})
            counts[fn][m.group(1)] = counts[fn].get(m.group(1), 0) + 1
    return counts


def chain_rules(kdir, device):
    """Over the device's class chain: kernel -> the math formats its rules name, and kernel -> the unit of
    its family (a child class that restates a family's unit changes it for every kernel listed)."""
    devices = tomllib.loads((kdir / "DEVICES.toml").read_text())
    klass = next(d["class"] for d in devices["device"] if d["id"] == device)
    chain = []
    while klass:
        chain.append(klass)
        klass = tomllib.loads((kdir / klass / "HARDWARE.toml").read_text()).get("inherits")
    formats, family_of, family_unit = {}, {}, {}
    for klass in reversed(chain):
        fusions = kdir / klass / "FUSIONS.toml"
        for rule in tomllib.loads(fusions.read_text()).get("rule", []) if fusions.exists() else []:
            names = rule.get("kernel", [])
            for k in [names] if isinstance(names, str) else names:
                for f in rule.get("formats", []):
                    formats.setdefault(k, set()).add(f.get("math", f.get("act")))
        families = kdir / klass / "KERNEL_FAMILIES.toml"
        for fam in tomllib.loads(families.read_text()).get("family", []) if families.exists() else []:
            family_unit[fam["id"]] = fam.get("unit", family_unit.get(fam["id"]))
            for k in fam.get("kernels", []):
                family_of[k] = fam["id"]
    return formats, {k: family_unit[f] for k, f in family_of.items()}


def main():
    notes_path, dis_path, table_path, kdir, device, arch = sys.argv[1:7]
    notes = parse_notes(Path(notes_path).read_text())
    mfma = parse_mfma(Path(dis_path).read_text())
    formats, units = chain_rules(Path(kdir), device)
    where = {}
    for line in Path(table_path).read_text().splitlines():
        cols = line.split("\t")
        if len(cols) >= 3 and cols[1] == "available":
            where[cols[0]] = cols[2]
    failures = []
    print(f"{device} ({arch}): {len(notes)} kernels in the code object")
    print(f"  {'kernel':42} {'unit':12} {'vgpr':>4} {'agpr':>4} {'sgpr':>4} {'lds':>6} {'scratch':>7} {'spills v/s':>10}  mfma")
    for name in sorted(notes):
        k = notes[name]
        own = units.get(name) == "tensor_core"
        unit = "matrix core" if own else "vector ALU"
        counts = mfma.get(name, {})
        scratch = int(k.get(".private_segment_fixed_size", "0"))
        vspill, sspill = int(k.get(".vgpr_spill_count", "0")), int(k.get(".sgpr_spill_count", "0"))
        lds = int(k.get(".group_segment_fixed_size", "0"))
        shown = ", ".join(f"{n} x{c}" for n, c in sorted(counts.items())) or "-"
        print(f"  {name:42} {unit:12} {k.get('.vgpr_count', '?'):>4} {k.get('.agpr_count', '?'):>4} "
              f"{k.get('.sgpr_count', '?'):>4} {lds:>6} {scratch:>7} {vspill:>5}/{sspill:<4}  {shown}")
        if scratch or vspill or k.get(".uses_dynamic_stack") == "true":
            failures.append(f"{name}: uses scratch ({scratch} bytes private, {vspill} VGPR spills, "
                            f"dynamic stack {k.get('.uses_dynamic_stack')})")
        if own:
            operands = {FORMAT_OPERAND[f] for f in formats.get(name, ()) if f in FORMAT_OPERAND}
            if not operands:
                failures.append(f"{name}: a matrix-core body whose rules declare no format this check knows")
            for op in sorted(operands):
                shapes = {m.group(1) for n in counts if (m := re.match(rf"v_mfma_f32_(\d+x\d+x\d+)_{op}(_1k)?$", n))}
                wanted = BF16_SHAPES.get(arch, set()) if op == "bf16" else shapes
                if not shapes & wanted:
                    failures.append(f"{name}: no {op} MFMA of the shapes {arch} issues "
                                    f"({', '.join(sorted(BF16_SHAPES.get(arch, ())))}); found {shown}")
        elif counts:
            failures.append(f"{name}: a shared vector-ALU body carries MFMA instructions ({shown})")
    missing = sorted(set(where) - set(notes))
    if missing:
        failures.append("available per met but not in the code object: " + ", ".join(missing))
    for f in failures:
        print(f"FAIL {f}")
    print(f"{device}: {'ISA checks pass' if not failures else f'{len(failures)} ISA check(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
