"""A small reader of the Lua scripts: which hash fields, statuses and stream fields they name."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CALL = re.compile(r"redis\.call\(\s*'(\w+)'\s*,")
_STRING = re.compile(r"'([^']*)'")
# A job's status is read into `status` or `v[1]` (HMGET) before it is compared.
_COMPARED = re.compile(r"(?:\bstatus|\bv\[1\])\s*[=~]=\s*'([^']*)'")
_EVENT_CALL = re.compile(r"\bevent\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
_HASH_NAME_ONLY = {"HGET", "HMGET", "HDEL", "HINCRBY", "HEXISTS"}


@dataclass
class Touched:
    """What one script names: job-hash fields, compared statuses, stream entry fields."""

    fields: set[str] = field(default_factory=set)
    statuses: set[str] = field(default_factory=set)
    entry_fields: dict[str, set[str]] = field(default_factory=dict)  # key variable → fields
    event_keys: set[str] = field(default_factory=set)


def call_args(source: str, start: int) -> list[str]:
    """The comma-separated arguments of the call whose '(' precedes ``start``, top level only."""
    depth, args, current = 1, [], ""
    for char in source[start:]:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                break
        if char == "," and depth == 1:
            args.append(current.strip())
            current = ""
        else:
            current += char
    return [*args, current.strip()] if current.strip() else args


def literal(arg: str) -> str | None:
    """The string a quoted literal argument holds; None for anything computed."""
    match = re.fullmatch(r"'([^']*)'", arg)
    return match[1] if match else None


def read_script(source: str) -> Touched:
    """Every field, status and event key a script names as a literal."""
    code = "\n".join(line.split("--", 1)[0] for line in source.splitlines())
    found = Touched()
    for call in _CALL.finditer(code):
        command, args = call[1], call_args(code, call.end())
        key, rest = args[0], args[1:]
        if key == "job" and command == "HSET":
            found.fields |= {n for n in map(literal, rest[0::2]) if n is not None}
            after = {rest[i]: rest[i + 1] for i in range(0, len(rest) - 1, 2)}
            statuses = [literal(v) for n, v in after.items() if literal(n) == "status"]
            found.statuses |= {s for s in statuses if s is not None}
        elif key == "job" and command in _HASH_NAME_ONLY:
            names = rest[:1] if command == "HINCRBY" else rest
            found.fields |= {n for n in map(literal, names) if n is not None}
        elif command == "XADD":
            pairs = rest[rest.index("'*'") + 1 :]
            names = {n for n in map(literal, pairs[0::2]) if n is not None}
            found.entry_fields[key] = found.entry_fields.get(key, set()) | names
    found.statuses |= {s for s in _COMPARED.findall(code) if s}
    for call in _EVENT_CALL.finditer(code):
        args = call_args(call[0], len("event("))
        if len(args) >= 3 and literal(args[2]) is not None:
            found.statuses.add(str(literal(args[2])))
    found.event_keys = {k for table in _tables(code) for k in re.findall(r"(\w+)\s*=", table)}
    return found


def _tables(code: str) -> list[str]:
    """The table literals a script passes to cjson.encode."""
    return re.findall(r"cjson\.encode\(\{([^}]*)\}\)", code)
