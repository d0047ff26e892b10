"""The folder map, checked from the source with ``ast``: only shared/ speaks Redis, no
import circle among ocrq's modules, and each part imports only the parts it may.

Every check is a function over source files; each test feeds the product code to it, and a
twin test feeds it a violation written to tmp_path, so that a check which could never fail
fails here.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
import redis.commands.cluster
import redis.commands.core
import redis.commands.sentinel

REPO = Path(__file__).resolve().parents[1]
# The product code: each folder and the ocrq package it is (producer/ is linked as ocrq/producer).
PRODUCT_FOLDERS = {
    "producer": "ocrq.producer",
    "consumer": "ocrq.consumer",
    "shared": "ocrq.shared",
    "fakevllm": "ocrq.fakevllm",
    "ocrq/cli": "ocrq.cli",
    "ocrq/mcp": "ocrq.mcp",
    "ocrq/deploy": "ocrq.deploy",
    "ocrq/client": "ocrq.client",
}
REDIS_PART = "ocrq.shared"  # the one part that may speak Redis


class MayImport(NamedTuple):
    """What a part's modules may import: ocrq modules under ``only``, none under ``never``."""

    only: tuple[str, ...]
    never: tuple[str, ...] = ()


# The import rules of the folder map (mirrored in CONTRIBUTING.md). A module follows the
# rule of the longest part that holds it; imports outside ocrq are not checked here.
IMPORT_RULES: dict[str, MayImport] = {
    "ocrq.shared": MayImport(only=("ocrq.shared",)),
    "ocrq.producer": MayImport(only=("ocrq.producer", "ocrq.shared")),
    "ocrq.producer.jobs": MayImport(
        only=("ocrq.producer", "ocrq.shared"), never=("ocrq.producer.batches",)
    ),
    "ocrq.consumer": MayImport(only=("ocrq.consumer", "ocrq.shared")),
    "ocrq.fakevllm": MayImport(only=("ocrq.fakevllm", "ocrq.shared")),
    "ocrq.client": MayImport(only=("ocrq.client", "ocrq.shared")),
    "ocrq.mcp": MayImport(only=("ocrq.mcp", "ocrq.client", "ocrq.shared")),
    "ocrq.deploy": MayImport(only=("ocrq.deploy", "ocrq.shared")),
    "ocrq.cli": MayImport(only=("ocrq",)),  # the dispatcher imports each role lazily
}

# Command methods of redis-py too generic to tell from Python's own (list.append,
# Event.set/wait, dict.get/keys, Path.unlink/rename, hashlib's digest, log.info, …) or from
# ocrq's own method names (JobStore.touch, EventHub.watch).
GENERIC_METHOD_NAMES = frozenset(
    {
        *("append", "auth", "bf", "cf", "cluster", "cms", "command", "copy", "decr"),
        *("delete", "digest", "dump", "echo", "eval", "exists", "failover", "ft", "get"),
        *("hello", "incr", "info", "json", "keys", "lolwut", "move", "object", "quit"),
        *("readonly", "readwrite", "rename", "reset", "restore", "role", "save", "scan"),
        *("select", "set", "shutdown", "sort", "substr", "strlen", "sync", "tdigest"),
        *("time", "topk", "touch", "ts", "type", "unlink", "vset", "wait", "watch"),
    }
)
PUBSUB_METHOD_NAMES = frozenset(
    {"subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe"}
) | {"get_message"}
# Names that reach a client however its methods are named.
CLIENT_ATTRIBUTES = frozenset({"redis", "execute_command"})
CLIENT_FACTORY_CALLS = frozenset({"pipeline", "pubsub"})
COMMAND_CLASSES = (
    redis.commands.core.CoreCommands,
    redis.commands.core.AsyncCoreCommands,
    redis.commands.cluster.RedisClusterCommands,
    redis.commands.cluster.AsyncRedisClusterCommands,
    redis.commands.sentinel.SentinelCommands,
    redis.commands.sentinel.AsyncSentinelCommands,
)


def redis_command_methods() -> frozenset[str]:
    """redis-py's command methods that no other object in ocrq's code has a method named."""
    names = {n for cls in COMMAND_CLASSES for n in dir(cls) if not n.startswith("_")}
    return frozenset(names - GENERIC_METHOD_NAMES - CLIENT_ATTRIBUTES) | PUBSUB_METHOD_NAMES


class Module(NamedTuple):
    """A module of the product: its dotted name and its file (links resolved)."""

    name: str
    path: Path


def product_modules(root: Path = REPO, folders: dict[str, str] = PRODUCT_FOLDERS) -> list[Module]:
    """Every .py file under the product folders, with its module name."""
    found: list[Module] = []
    for folder, package in folders.items():
        base = (root / folder).resolve()
        for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for filename in sorted(f for f in filenames if f.endswith(".py")):
                path = Path(dirpath) / filename
                parts = path.relative_to(base).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                found.append(Module(".".join((package, *parts)), path))
    return found


def where(module: Module, node: ast.AST, root: Path = REPO) -> str:
    """``file:line`` of a node, relative to the repository when it lies inside it."""
    path = module.path.relative_to(root) if module.path.is_relative_to(root) else module.path
    return f"{path}:{getattr(node, 'lineno', 0)}"


def in_part(name: str, part: str) -> bool:
    """True when module ``name`` is ``part`` or lies under it."""
    return name == part or name.startswith(f"{part}.")


# -- 1. No Redis command outside shared/ ---------------------------------------------------


def redis_uses(module: Module, commands: frozenset[str], root: Path = REPO) -> list[str]:
    """``file:line what`` for each import of redis, client attribute or command call."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(module.path.read_text(), str(module.path))):
        use = redis_use(node, commands)
        if use is not None:
            found.append((getattr(node, "lineno", 0), f"{where(module, node, root)} {use}"))
    return [use for _, use in sorted(found)]


def redis_use(node: ast.AST, commands: frozenset[str]) -> str | None:
    """What a node does with Redis, if anything: an import, a client attribute, a command."""
    if isinstance(node, ast.Import):
        if any(alias.name.split(".")[0] == "redis" for alias in node.names):
            return "imports redis"
    elif isinstance(node, ast.ImportFrom):
        if node.level == 0 and (node.module or "").split(".")[0] == "redis":
            return f"imports from {node.module}"
    elif isinstance(node, ast.Attribute) and node.attr in CLIENT_ATTRIBUTES:
        return f"uses .{node.attr}"
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in CLIENT_FACTORY_CALLS or node.func.attr in commands:
            return f"calls .{node.func.attr}()"
    return None


def redis_outside_shared(modules: Iterable[Module], root: Path = REPO) -> list[str]:
    """Every use of Redis by a module outside shared/."""
    commands = redis_command_methods()
    return [
        use
        for module in modules
        if not in_part(module.name, REDIS_PART)
        for use in redis_uses(module, commands, root)
    ]


def test_the_command_list_holds_the_commands_ocrq_sends() -> None:
    listed = redis_command_methods()
    sent = {"xreadgroup", "xautoclaim", "xclaim", "xack", "xdel", "xadd", "xlen", "xpending"}
    sent |= {"xpending_range", "xinfo_groups", "xinfo_stream", "xgroup_create", "xrange"}
    sent |= {"hget", "hset", "hgetall", "hmget", "hincrby", "hdel", "zadd", "zrange", "zrem"}
    sent |= {"expire", "pexpire", "publish", "subscribe", "psubscribe", "evalsha", "ping"}
    sent |= {"register_script", "get_message", "zrevrange", "rpush", "lrange"}
    assert sent <= listed, sorted(sent - listed)
    assert not {"get", "set", "delete", "keys", "append", "wait", "info"} & listed


def test_no_module_outside_shared_speaks_redis() -> None:
    assert redis_outside_shared(product_modules()) == []


def test_the_redis_check_finds_each_kind_of_use(tmp_path: Path) -> None:
    (tmp_path / "producer").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "producer" / "bad.py").write_text(
        "import redis.asyncio\n"
        "from redis.exceptions import RedisError\n"
        "async def f(store, rt):\n"
        "    await store.redis.hget('k', 'f')\n"
        "    await rt.store.xreadgroup('g', 'me', {}, 1)\n"
        "    async with rt.client.pipeline() as pipe: pipe.execute_command('PING')\n"
        "    rt.client.pubsub()\n"
        "    await rt.hub.subscribe('events')\n"
        "    d = {}; d.get('x'); d.keys()\n"  # generic names: not Redis
    )
    (tmp_path / "shared" / "fine.py").write_text("import redis\nasync def f(r): await r.ping()\n")
    folders = {"producer": "ocrq.producer", "shared": "ocrq.shared"}
    found = redis_outside_shared(product_modules(tmp_path, folders), tmp_path)
    assert found == [
        "producer/bad.py:1 imports redis",
        "producer/bad.py:2 imports from redis.exceptions",
        "producer/bad.py:4 calls .hget()",
        "producer/bad.py:4 uses .redis",
        "producer/bad.py:5 calls .xreadgroup()",
        "producer/bad.py:6 calls .pipeline()",
        "producer/bad.py:6 uses .execute_command",
        "producer/bad.py:7 calls .pubsub()",
        "producer/bad.py:8 calls .subscribe()",
    ]


# -- 2. The import graph -------------------------------------------------------------------


class Edge(NamedTuple):
    """One import: the module imported, and where."""

    target: str
    at: str


def imported_names(module: Module, tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """Every dotted name a module imports, anywhere in it (functions included), with the
    node; ``from a import b`` gives ``a.b`` (a module, or a name in ``a``)."""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}", node


def nearest_module(name: str, known: set[str]) -> str | None:
    """The module a dotted name lies in (itself, or its longest known prefix)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: list[Module], root: Path = REPO) -> dict[str, list[Edge]]:
    """Each module's imports of other product modules."""
    known = {m.name for m in modules}
    graph: dict[str, list[Edge]] = {}
    for module in modules:
        edges = graph.setdefault(module.name, [])
        tree = ast.parse(module.path.read_text(), str(module.path))
        for name, node in imported_names(module, tree):
            target = nearest_module(name, known)
            if target is not None and target != module.name and target != "ocrq":
                edges.append(Edge(target, where(module, node, root)))
    return graph


def import_cycles(graph: dict[str, list[Edge]]) -> list[str]:
    """Each circle of imports (a strongly connected set of modules), as one path round it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(name: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules
        index[name] = low[name] = len(index)
        stack.append(name)
        for edge in graph.get(name, []):
            if edge.target not in index:
                visit(edge.target)
                low[name] = min(low[name], low[edge.target])
            elif edge.target in stack:
                low[name] = min(low[name], index[edge.target])
        if low[name] == index[name]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == name:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return [round_path(graph, set(members)) for members in sorted(circles)]


def round_path(graph: dict[str, list[Edge]], members: set[str]) -> str:
    """A path from the first member back to itself inside the circle, each step's import."""
    start = min(members)
    came: dict[str, tuple[str, Edge]] = {}
    frontier = [start]
    while frontier:  # breadth first: the shortest way round
        name = frontier.pop(0)
        for edge in graph.get(name, []):
            if edge.target in members and edge.target not in came:
                came[edge.target] = (name, edge)
                frontier.append(edge.target)
    steps: list[str] = []
    name = start
    while True:
        before, edge = came[name]
        steps.append(f"{before} -> {name} ({edge.at})")
        name = before
        if name == start:
            break
    return "; ".join(reversed(steps))


def test_no_import_circle_among_ocrq_modules() -> None:
    assert import_cycles(import_graph(product_modules())) == []


def test_the_circle_check_finds_a_circle_closed_inside_a_function(tmp_path: Path) -> None:
    (tmp_path / "ocrq" / "cli").mkdir(parents=True)
    (tmp_path / "ocrq" / "cli" / "submit.py").write_text("from ocrq.cli import batch_cli\n")
    (tmp_path / "ocrq" / "cli" / "batch_cli.py").write_text(
        "def run():\n    from ocrq.cli.submit import main\n    return main\n"
    )
    (tmp_path / "ocrq" / "cli" / "fine.py").write_text("from . import submit\n")
    modules = product_modules(tmp_path, {"ocrq/cli": "ocrq.cli"})
    assert import_cycles(import_graph(modules, tmp_path)) == [
        "ocrq.cli.batch_cli -> ocrq.cli.submit (ocrq/cli/batch_cli.py:2); "
        "ocrq.cli.submit -> ocrq.cli.batch_cli (ocrq/cli/submit.py:1)"
    ]


# -- 3. The import rules -------------------------------------------------------------------


def rule_of(name: str) -> MayImport | None:
    """The rule of the longest part holding module ``name``."""
    parts = [part for part in IMPORT_RULES if in_part(name, part)]
    return IMPORT_RULES[max(parts, key=len)] if parts else None


def broken_import_rules(graph: dict[str, list[Edge]]) -> list[str]:
    """``file:line: importer imports target`` for every import its part's rule forbids."""
    broken: list[str] = []
    for name, edges in sorted(graph.items()):
        rule = rule_of(name)
        if rule is None:
            broken.append(f"{name}: in no part of IMPORT_RULES")
            continue
        for edge in edges:
            allowed = any(in_part(edge.target, part) for part in rule.only)
            if not allowed or any(in_part(edge.target, part) for part in rule.never):
                broken.append(f"{edge.at}: {name} imports {edge.target}")
    return broken


def test_every_part_imports_only_what_the_folder_map_allows() -> None:
    assert broken_import_rules(import_graph(product_modules())) == []


@pytest.mark.parametrize(
    ("folder", "source", "imported"),
    [
        ("shared", "from ocrq.producer import app\n", "ocrq.producer.app"),
        ("producer", "def f():\n    import ocrq.consumer.worker\n", "ocrq.consumer.worker"),
        ("consumer", "from ocrq.cli.main import main\n", "ocrq.cli.main"),
        (
            "producer/jobs",
            "from ocrq.producer.batches import routes\n",
            "ocrq.producer.batches.routes",
        ),
        ("ocrq/client", "from ocrq.producer import app\n", "ocrq.producer.app"),
        ("ocrq/mcp", "from ocrq.deploy import keda\n", "ocrq.deploy.keda"),
        ("ocrq/deploy", "from ocrq.client import sync\n", "ocrq.client.sync"),
        ("fakevllm", "from ocrq.consumer import worker\n", "ocrq.consumer.worker"),
    ],
)
def test_the_rule_check_finds_a_forbidden_import(
    tmp_path: Path, folder: str, source: str, imported: str
) -> None:
    folders = dict(PRODUCT_FOLDERS)
    for product_folder in folders:
        (tmp_path / product_folder).mkdir(parents=True, exist_ok=True)
    for target in (
        "producer/app.py",
        "consumer/worker.py",
        "ocrq/cli/main.py",
        "ocrq/deploy/keda.py",
    ):
        (tmp_path / target).write_text("")
    for target in ("producer/batches/routes.py", "ocrq/client/sync.py"):
        (tmp_path / target).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / target).write_text("")
    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    (tmp_path / folder / "bad.py").write_text(source)
    graph = import_graph(product_modules(tmp_path, folders), tmp_path)
    broken = broken_import_rules(graph)
    assert len(broken) == 1 and broken[0].startswith(f"{folder}/bad.py:"), broken
    assert broken[0].endswith(f" imports {imported}"), broken


def test_batches_may_import_jobs_and_the_cli_anything(tmp_path: Path) -> None:
    folders = {"producer": "ocrq.producer", "ocrq/cli": "ocrq.cli"}
    (tmp_path / "producer" / "jobs").mkdir(parents=True)
    (tmp_path / "producer" / "batches").mkdir()
    (tmp_path / "ocrq" / "cli").mkdir(parents=True)
    (tmp_path / "producer" / "jobs" / "views.py").write_text("")
    (tmp_path / "producer" / "batches" / "routes.py").write_text(
        "from ocrq.producer.jobs import views\n"
    )
    (tmp_path / "ocrq" / "cli" / "main.py").write_text("from ocrq.producer.batches import routes\n")
    graph = import_graph(product_modules(tmp_path, folders), tmp_path)
    assert broken_import_rules(graph) == []
    assert [e.target for e in graph["ocrq.cli.main"]] == ["ocrq.producer.batches.routes"]


# -- 4. Only shared/blobs speaks to the object store ---------------------------------------

BLOB_PART = "ocrq.shared.blobs"  # the one part that may import an object-store client
BLOB_CLIENTS = frozenset({"obstore", "aiobotocore", "botocore", "boto3", "aioboto3"})


def blob_client_imports(modules: Iterable[Module], root: Path = REPO) -> list[str]:
    """``file:line imports X`` for each object-store client imported outside shared/blobs."""
    found: list[str] = []
    for module in modules:
        if in_part(module.name, BLOB_PART):
            continue
        for node in ast.walk(ast.parse(module.path.read_text(), str(module.path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            found += [
                f"{where(module, node, root)} imports {name}"
                for name in names
                if name.split(".")[0] in BLOB_CLIENTS
            ]
    return found


def test_no_module_outside_shared_blobs_imports_an_object_store_client() -> None:
    assert blob_client_imports(product_modules()) == []


def test_the_store_client_check_finds_an_import(tmp_path: Path) -> None:
    (tmp_path / "consumer").mkdir()
    (tmp_path / "shared" / "blobs").mkdir(parents=True)
    (tmp_path / "consumer" / "bad.py").write_text("from obstore.store import S3Store\n")
    (tmp_path / "shared" / "blobs" / "s3.py").write_text("import obstore\n")
    folders = {"consumer": "ocrq.consumer", "shared": "ocrq.shared"}
    found = blob_client_imports(product_modules(tmp_path, folders), tmp_path)
    assert found == ["consumer/bad.py:1 imports obstore.store"]
