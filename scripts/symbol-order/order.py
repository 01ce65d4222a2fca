#!/usr/bin/env python3
"""The functions a training run executed, as a symbol-ordering file for the linker.

`order.py <linker map> <callgrind output>... > symbols.txt`. The binary was stripped, so
callgrind gives the address of each instruction run (`--dump-instr=yes --compress-pos=no`), in
the binary's own layout; the linker map of the same link says which function section holds it
(one section per function, named after its symbol). Functions are listed in the order the
profile first names them.
"""
import bisect
import re
import sys

SECTION = re.compile(r"\(\.text(?:\.unlikely|\.hot|\.startup)?\.(\S+)\)$")
ADDRESS = re.compile(r"^(?:\+|-)?(0x[0-9a-fA-F]+)\s")


def function_sections(map_path):
    """(start, end, symbol) of every function section in an lld `-Map` file, by start."""
    sections = []
    with open(map_path, errors="replace") as f:
        for line in f:
            fields = line.split(None, 4)
            if len(fields) < 5:
                continue
            found = SECTION.search(fields[4].rstrip())
            size = int(fields[2], 16) if found else 0
            if size:
                start = int(fields[0], 16)
                sections.append((start, start + size, found.group(1)))
    return sorted(sections)


def executed(profile_paths, binary_name):
    """Addresses of the instructions callgrind saw run inside `binary_name`, first seen first."""
    for path in profile_paths:
        in_binary = False
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("ob="):
                    in_binary = line.rstrip().endswith("/" + binary_name)
                elif in_binary:
                    found = ADDRESS.match(line)
                    if found:
                        yield int(found.group(1), 16)


def main():
    map_path, *profiles = sys.argv[1:]
    sections = function_sections(map_path)
    starts = [start for start, _, _ in sections]
    names, named, inside, outside = [], set(), 0, 0
    for address in executed(profiles, "agentls"):
        index = bisect.bisect_right(starts, address) - 1
        if index < 0 or address >= sections[index][1]:
            outside += 1
            continue
        inside += 1
        name = sections[index][2]
        if name not in named:
            named.add(name)
            names.append(name)
    if inside < 0.9 * (inside + outside):
        sys.exit(f"order: only {inside} of {inside + outside} instructions run lie in a function"
                 " section of the map; is it the map of another link?")
    print("\n".join(names))
    print(f"order: {len(names)} functions of {len(sections)}", file=sys.stderr)


if __name__ == "__main__":
    main()
