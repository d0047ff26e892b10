"""Redis ACL rules for the producer and the workers, generated from the code's key layout.

Each role gets its own Redis user with only the commands it sends and the keys and channel
it touches, so a worker whose MuPDF was exploited cannot run CONFIG, FLUSHALL, MODULE or
ACL, nor touch a key outside ocrq's prefix, and a producer cannot take jobs off a lane.

Where the rules come from:
- keys: every method of ``shared.keys.Keys`` that names a key, called with placeholders
  (``{p*}`` for the partition's hash tag, ``*`` for ids, tenants and lanes), for the roles
  ``KEY_ROLES`` gives it; a new kind of key must be given its roles (a test fails until then);
- the channel: the events channel (``Keys.events``) for both roles;
- commands: what each role's Python code sends (``PRODUCER_COMMANDS``, ``WORKER_COMMANDS``),
  plus every ``redis.call`` of the scripts it runs, read from their Lua sources. In Redis 7 a
  script runs with its caller's permissions: each call in it is checked like a command.

Only commands that Redis 7.0 knows: ``CLIENT SETINFO`` (7.2, sent by redis-py on connect,
its refusal ignored) cannot be named, so it is left out.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from ocrq.shared.connect import redis_mode
from ocrq.shared.keys import SCRIPT_NAMES, TAG_SEP, Keys, load_script, script_source
from ocrq.shared.settings import Settings

Role = Literal["producer", "worker"]
ROLES: tuple[Role, ...] = ("producer", "worker")
PRODUCER: frozenset[Role] = frozenset({"producer"})
WORKER: frozenset[Role] = frozenset({"worker"})
BOTH: frozenset[Role] = PRODUCER | WORKER
DEFAULT_USERS: dict[Role, str] = {"producer": "ocrq-producer", "worker": "ocrq-worker"}
T = TypeVar("T")

# The kinds of key (a Keys method each) and the roles that read or write them. Every role
# that touches a kind both reads and writes it, so plain ``~`` patterns (read and write).
KEY_ROLES: dict[str, frozenset[Role]] = {
    "job": BOTH,  # the producer writes and deletes it, the worker moves it on
    "job_pages": BOTH,  # the worker keeps finished pages, the producer reads and deletes them
    "job_files": BOTH,  # the worker keeps figures and PDFs, the producer serves them
    "stream": BOTH,  # the producer adds entries, the worker reads and acks them
    "batch": BOTH,  # the producer opens and seals it, an ending job counts in it
    "batch_jobs": BOTH,
    "no_batch": BOTH,  # keys that never exist, named by the ending scripts
    "webhooks": BOTH,  # the ending scripts add deliveries, the worker sends them
    "tenant_active": BOTH,  # added with the job, removed by the script that ends it
    "incoming": PRODUCER,  # a new job's fields within its enqueue transaction
    "idem": PRODUCER,
    "batch_idem": PRODUCER,
    "open_batches": PRODUCER,  # batches not yet sealed, for the producers' sweeper
    "tenant_jobs": PRODUCER,
    "replicated": PRODUCER,  # the WAIT tick (OCRQ_REDIS_WAIT_REPLICAS)
    "dead": WORKER,  # poisoned jobs
    "lease": WORKER,  # the object-store sweeper's lease (one worker of the stack sweeps)
    "fair_tenants": BOTH,  # a new job's tenant joins it; take.lua and finish.lua score it
    "fair_queue": BOTH,  # a new job joins its tenant's queue, take.lua pops it
    "fair_taken": WORKER,  # the job each ticket was given
    "fair_clock": WORKER,
    "quota": BOTH,  # the producer admits jobs and counts requests; the job's end releases it
    "usage": BOTH,  # the ending scripts count (cancel is the producer's); GET /v1/usage reads
    "audit": PRODUCER,  # the producer appends and serves the audit trail
}
# Keys methods that name no kind of their own (lists of keys above, or no key at all).
NOT_KEY_KINDS = frozenset({"pick_tag", "streams", "lane_streams", "job_prefix"})

# The scripts each role runs (a script's "Caller:" header says the same; a test checks).
SCRIPT_ROLES: dict[str, frozenset[Role]] = {
    "enqueue": PRODUCER,
    "cancel": PRODUCER,
    "batch_open": PRODUCER,
    "batch_seal": PRODUCER,
    "claim": WORKER,
    "progress": WORKER,
    "finish": WORKER,
    "touch": WORKER,
    "release": WORKER,
    "poison": WORKER,
    "prune": WORKER,
    "webhook_state": WORKER,
    "save_files": WORKER,
    "lease": WORKER,
    "take": WORKER,
    "quota_admit": PRODUCER,
    "quota_release": BOTH,  # the end of a job: the worker's finish, the producer's cancel
}

# Both roles: health checks and pub/sub keep-alives, and the scripts (redis-py sends
# EVALSHA, and SCRIPT LOAD when the server does not have the script yet).
COMMON_COMMANDS = ("ping", "evalsha", "script|load")
PRODUCER_COMMANDS = (
    # shared/enqueue.py: one MULTI/EXEC (the fields, then enqueue.lua); the tenant's active
    # jobs in the other partitions counted first
    "multi",
    "exec",
    "discard",
    "get",
    "exists",
    "xlen",
    "zcard",
    "hset",
    "pexpire",  # the incoming hash's guard, should the script fail
    "xgroup|create",
    "xadd",
    "set",
    "zadd",
    "zremrangebyrank",
    "expire",
    "hincrby",
    "rpush",
    "zrange",  # a tenant at OCRQ_MAX_TENANT_BACKLOG: its oldest active jobs are checked
    "incr",  # shared/quota_store.py: a tenant's requests this minute
    "hscan",  # shared/quota_store.py: a tenant's jobs in flight, when at its limit
    "xrevrange",  # producer/audit.py: the audit trail, newest first
    "xrange",
    "wait",  # shared/replicas.py
    # shared/store.py: polls, the tenant's job list, /readyz and /metrics
    "hmget",
    "hget",
    "hkeys",  # a job's finished pages, for its event stream (producer/live.py)
    "zrem",
    "zrevrange",
    "xinfo|groups",
    "info",
    # shared/batch_store.py: reads, the delete, the sweep of batches left open
    "del",
    "hgetall",
    "lrange",
    "zrangebyscore",
    "publish",
    "subscribe",
    "unsubscribe",  # shared/event_channel.py: the events channel (producer/events.py)
)
WORKER_COMMANDS = (
    # shared/lanes.py: the lanes' entries, reclaims, its own pending entries; and
    # shared/webhook_queue.py: the webhooks streams' entries (XCLAIM holds one)
    "xreadgroup",
    "xautoclaim",
    "xpending",
    "xrange",
    "xack",
    "xdel",
    "xgroup|create",
    "xclaim",
    "hmget",
    "hgetall",  # consumer/webhook_attempts.py: a batch's summary
    "hget",  # shared/store.py: the job's status (consumer/heartbeat.py)
    "exists",  # shared/store.py jobs_exist: whether a stored object's job still exists
)
PYTHON_COMMANDS: dict[Role, tuple[str, ...]] = {
    "producer": PRODUCER_COMMANDS,
    "worker": WORKER_COMMANDS,
}
# A cluster client reads the slot map and the command table (to find each command's keys).
CLUSTER_COMMANDS = ("cluster|slots", "command")
# Redis 7.0 commands whose permission is given per subcommand.
CONTAINERS = frozenset(
    {
        "acl",
        "client",
        "cluster",
        "command",
        "config",
        "function",
        "latency",
        "memory",
        "module",
        "object",
        "pubsub",
        "script",
        "slowlog",
        "xgroup",
        "xinfo",
    }
)

_CALL = re.compile(r"""redis\.p?call\(\s*['"](\w+)['"]\s*(?:,\s*(['"]?)(\w*))?""")
_CALLER = re.compile(r"^-- .*?Callers?: (.*)$", re.MULTILINE)
_TAG, _ANY = "\x00tag\x00", "\x00any\x00"  # placeholders that no key layout holds


def glob_escape(text: str) -> str:
    """``text`` as a Redis glob that matches only itself."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def script_commands(name: str) -> set[str]:
    """Every command a script (with the helpers it needs) calls, ``container|sub`` style."""
    source = load_script(name)
    calls = _CALL.findall(source)
    if len(calls) != len(re.findall(r"redis\.p?call\(", source)):
        raise ValueError(f"{name}.lua calls a command that is not a literal name")
    found: set[str] = set()
    for command, quote, argument in calls:
        command = command.lower()
        if command in CONTAINERS:
            if not quote or not argument:
                raise ValueError(f"{name}.lua calls {command.upper()} with no literal subcommand")
            command = f"{command}|{argument.lower()}"
        found.add(command)
    return found


def script_caller(name: str) -> str:
    """The text after ``Caller:`` (or ``Callers:``) in a script's header."""
    match = _CALLER.search(script_source(name))
    if match is None:
        raise ValueError(f"{name}.lua names no Caller in its header")
    return match[1]


def _placeholder(parameter: str) -> str:
    """What stands for a Keys method's argument: the tag, an id carrying the tag, or any."""
    if parameter == "tag":
        return _TAG
    if parameter.endswith("_id"):
        return f"{_TAG}{TAG_SEP}{_ANY}"
    return _ANY


def _kind_keys(method: Callable[..., str | tuple[str, ...]]) -> Iterator[str]:
    names = list(inspect.signature(method).parameters)
    made = method(*(_placeholder(name) for name in names))
    yield from (made,) if isinstance(made, str) else made


def _to_pattern(key: str) -> str:
    """A key made of placeholders as a glob: any id, tenant or lane; any ``p…`` tag."""
    key = glob_escape(key.replace(f"{_TAG}{TAG_SEP}{_ANY}", _ANY))
    return key.replace(_TAG, "p*").replace(_ANY, "*")


def key_kinds() -> list[str]:
    """The public Keys methods that name a kind of key."""
    return [
        name
        for name, _ in inspect.getmembers(Keys, inspect.isfunction)
        if not name.startswith("_") and name not in NOT_KEY_KINDS
    ]


def key_patterns(keys: Keys, role: Role) -> list[str]:
    """The role's key patterns, any covered by another left out."""
    patterns: list[str] = []
    for kind in key_kinds():
        if role in _given(KEY_ROLES, kind, "Keys method", "KEY_ROLES"):
            patterns += [_to_pattern(k) for k in _kind_keys(getattr(keys, kind))]
    kept = sorted(set(patterns))
    return [p for p in kept if not any(q != p and _covers(q, p) for q in kept)]


def _given(table: dict[str, T], name: str, what: str, table_name: str) -> T:
    """``table[name]``; a clear error for a new key or script nobody has given a role."""
    if name not in table:
        raise ValueError(f"the {what} {name!r} has no role: add it to {table_name} in {__name__}")
    return table[name]


def _covers(general: str, specific: str) -> bool:
    """True when glob ``general`` matches every key glob ``specific`` does (its text does)."""
    parts = re.split(r"(\\.|\*|\?)", general)
    regex = "".join(
        ".*" if p == "*" else "." if p == "?" else re.escape(p[1:] if p.startswith("\\") else p)
        for p in parts
    )
    return re.fullmatch(regex, specific) is not None


def role_commands(settings: Settings, role: Role) -> list[str]:
    """Every command the role may run, sorted."""
    commands = set(COMMON_COMMANDS) | set(PYTHON_COMMANDS[role])
    for name in SCRIPT_NAMES:
        if role in _given(SCRIPT_ROLES, name, "script", "SCRIPT_ROLES"):
            commands |= script_commands(name)
    if redis_mode(settings) == "cluster":
        commands |= set(CLUSTER_COMMANDS)
    if _database(settings.store.redis_url) != 0:
        commands.add("select")
    return sorted(commands)


def _database(url: str) -> int:
    path = (urlsplit(url).path or "/0").strip("/")
    return int(path) if path.isdigit() else 0


def role_rules(settings: Settings, role: Role) -> str:
    """The role's ACL rules: its keys, the events channel, its commands and no other."""
    keys = Keys(settings.store.prefix, settings.store.partitions)
    patterns = " ".join(f"~{p}" for p in key_patterns(keys, role))
    commands = " ".join(f"+{c}" for c in role_commands(settings, role))
    channel = f"&{glob_escape(keys.events)}"
    return f"resetkeys {patterns} resetchannels {channel} -@all {commands}"


def user_line(name: str, password: str, rules: str) -> str:
    """What follows ``user`` on an ACL file's line: the name, its password, its rules."""
    return f"{name} on >{password} {rules}"


def acl_file_lines(settings: Settings) -> str:
    """An ACL file's ``user`` line per role, the passwords left as placeholders to replace."""
    lines = [
        user_line(DEFAULT_USERS[role], f"{role.upper()}_PASSWORD", role_rules(settings, role))
        for role in ROLES
    ]
    return "".join(f"user {line}\n" for line in lines)
