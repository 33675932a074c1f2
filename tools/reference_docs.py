"""The reference tables of the docs, each rendered from the one declaration of what it lists.

Every table sits in a Markdown file between two markers::

    <!-- generated: NAME (make props-docs) -->
    ...
    <!-- end: NAME -->

``make props-docs`` (``python -m tools.reference_docs``) rewrites every block and the construct's docstring from
the declarations; ``tests/test_reference_docs.py`` fails while any differs, and so does ``make docs`` (the site's
hook, ``tools/docs_hooks.py``). Repository tooling: it ships in no distribution.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import inspect
import io
import json
import re
import sys
import textwrap
import tokenize
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The files that hold generated blocks: the README and every page of the site.
DOCUMENTS = ("README.md", "docs")
BLOCK = re.compile(r"(?ms)^<!-- generated: (?P<name>[a-z-]+) \(make props-docs\) -->\n.*?^<!-- end: (?P=name) -->$")
DOCSTRING_INDENT = " " * 4
DOCSTRING_WIDTH = 116
# The docstring's :param lines are the end of the class docstring, from the first one to its closing quotes.
_PARAMS = re.compile(r'(?ms)^    :param sender:.*?(?=^    """)')
# The props the README shows, in its order: what a first pipeline reaches for. The site lists them all.
FIRST_PROPS = ("sender", "from_addresses", "delivery", "function_timeout", "max_concurrency", "send_rate",
               "dedupe_ttl", "alarm_topic", "allowed_recipients", "key_privacy")
PROP_COLUMNS = ("prop", "type", "default", "what it does, and the rules checked at synth")
# Options argparse prints at this width, whatever the terminal that runs the renderer.
HELP_COLUMNS = "100"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _type_name(hint: object) -> str:
    text = str(hint)
    text = re.sub(r"<(?:class|enum) '([^']+)'>", r"\1", text)
    text = text.replace("collections.abc.", "").replace(" | None", "")
    text = re.sub(r"sendonce_contract\.[a-z_]+\.", "", text)  # exported by the construct's package
    text = re.sub(r"aws_cdk\.aws_([a-z0-9_]+)\.", lambda m: m.group(1).rstrip("_") + ".", text)
    return text.replace("aws_cdk.", "")


def _prop_rows(names: tuple[str, ...] | None = None) -> list[tuple[str, ...]]:
    from sendonce_constructs.queue_props import declared_props, declared_types, prop_text

    declared, types = declared_props(), declared_types()
    chosen = names if names is not None else tuple(declared)
    return [(f"`{name}`", f"`{_type_name(types[name])}`", declared[name].default_doc, prop_text(name))
            for name in chosen]


def props() -> str:
    return _table(PROP_COLUMNS, _prop_rows())


def props_first() -> str:
    return _table(PROP_COLUMNS, _prop_rows(FIRST_PROPS))


def _construct_sources() -> dict[str, str]:
    package = ROOT / "sendonce_constructs"
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(package.glob("*.py"))}


def error_ids() -> str:
    from sendonce_constructs import rules
    from sendonce_constructs.errors import ID_PREFIX
    from tools.resolved_props_source import reads

    rows: list[tuple[str, ...]] = []
    # Each rule weighs the props (and facts) it reads: `x (given)` is whether prop x was given.
    for registered in rules.RULES:
        if registered.id is not None:
            rows.append((f"`{registered.id}`", f"the rule `{registered.check.__name__}`",
                         ", ".join(f"`{name}`" for name in reads(registered.check))))
    rows += [(f"`{ID_PREFIX}{row.id}`", "the rule `check_ranges`, its row of `RANGES`", f"`{name}`")
             for row, name in zip(rules.RANGES, reads(rules.check_ranges), strict=True)]
    rows.sort()
    # The ids the construct raises outside the rules: each spelled once, where it is raised.
    raised = re.compile(r'f"\{ID_PREFIX\}([A-Z][A-Za-z]+)"')
    outside: dict[str, set[str]] = {}
    for name, source in _construct_sources().items():
        for found in raised.findall(source):
            outside.setdefault(f"{ID_PREFIX}{found}", set()).add(name)
    for rule_id in sorted(outside):
        rows.append((f"`{rule_id}`", "raised by " + ", ".join(f"`{m}`" for m in sorted(outside[rule_id])), ""))
    return _table(("id", "where", "values it weighs"), rows)


def warning_ids() -> str:
    from sendonce_constructs.synth_warnings import WARNINGS

    return _table(("warning id", "when", "acknowledge with"),
                  [(f"`{warning.id}`", warning.when, f"`Acknowledgment(id=\"Annotation::{warning.id}\", reason=...)`")
                   for warning in WARNINGS])


def _commented_names(cls: type) -> Iterator[tuple[str, str, str, str]]:
    """(value, the comment beside it, the comment just above it, the heading of its group) for each constant of
    ``cls``, in source order: the declaration's own comments are its documentation."""
    source = textwrap.dedent(inspect.getsource(cls))
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    comments = {tok.start[0]: tok.string.lstrip("# ").strip() for tok in tokens if tok.type == tokenize.COMMENT}
    group, above = "", ""
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            above = (above + " " + stripped.lstrip("# ")).strip()
            continue
        match = re.match(r"\s+([A-Z_]+) = (.+?)(\s+#.*)?$", line)
        if not match:
            continue
        if above:
            group = re.split(r"[:,(]", above)[0].strip().rstrip(".")
        beside = comments.get(number, "") if match.group(3) else ""
        yield str(getattr(cls, match.group(1))), beside, above, group
        above = ""


def metrics() -> str:
    from sendonce_contract.schema import METRIC_DIMENSION, METRIC_NAMESPACE, SES_EVENT_TYPES, Metric

    rows = [(f"`{name}`", group, beside) for name, beside, _, group in _commented_names(Metric)]
    rows += [(f"`{event.metric}`", "The recorder's: one per SES event type", f"SES's `{event.name}` events")
             for event in SES_EVENT_TYPES if event.metric not in {row[0].strip("`") for row in rows}]
    return (f"Namespace `{METRIC_NAMESPACE}`, dimension `{METRIC_DIMENSION}` (the construct's path).\n\n"
            + _table(("metric", "written by", "note"), rows))


def reason_codes() -> str:
    from sendonce_contract.schema import ReasonCode

    rows = [(f"`{code}`", beside) for code, beside, _, _ in _commented_names(ReasonCode) if beside]
    rows.append((f"`{ReasonCode.REDRIVEN_BY_SQS.value}`",
                 "a message with none of our attributes: SQS moved it itself when maxReceiveCount was reached"))
    return _table(("reason code", "meaning"), rows)


def dead_letter_attributes() -> str:
    from sendonce_contract.schema import DeadLetter

    return _table(("message attribute", "note"), [(f"`{name}`", beside or above or "on every dead letter")
                                                 for name, beside, above, _ in _commented_names(DeadLetter)
                                                 if name != DeadLetter.PREFIX])


def copy_attributes() -> str:
    from sendonce_contract.schema import CopyAttribute

    return _table(("message attribute", "what a delayed copy carries"),
                  [(f"`{name}`", beside or above or "") for name, beside, above, _ in _commented_names(CopyAttribute)])


@cache
def _all_on_alarms(urgent_lane: bool = False, guard: bool = False, room: bool = False,
                   ) -> tuple[tuple[str, str, str], ...]:
    """(name, threshold, description) of every alarm a pipeline with every alarm-bearing option on makes (and
    with ``urgent_lane``, its urgent lane's alarms; with ``guard``, the mis-keyed-producer guard's; with ``room``,
    the waiting room's)."""
    import aws_cdk as cdk
    from aws_cdk import aws_cloudwatch as cloudwatch

    from sendonce_constructs import SendOnceEmailQueue

    stack = cdk.Stack(cdk.App(), "Reference")
    from sendonce_constructs import OnSuspectedDouble

    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", urgent_lane=urgent_lane,
                                  suspected_doubles=OnSuspectedDouble.FLAG if guard else None,
                                  recipient_cap=20 if guard else None, waiting_room=room)
    found = []
    for name, alarm in pipeline.alarms.items():
        resource = alarm.node.default_child
        assert isinstance(resource, cloudwatch.CfnAlarm)
        found.append((name, f"{resource.threshold:g}", str(resource.alarm_description)))
    return tuple(found)


def _urgent_lane_alarms() -> tuple[tuple[str, str, str], ...]:
    default = set(alarm_names_by_default())
    return tuple(alarm for alarm in _all_on_alarms(urgent_lane=True) if alarm[0] not in default)


def _guard_alarms() -> tuple[tuple[str, str, str], ...]:
    default = set(alarm_names_by_default())
    return tuple(alarm for alarm in _all_on_alarms(guard=True) if alarm[0] not in default)


def _room_alarms() -> tuple[tuple[str, str, str], ...]:
    default = set(alarm_names_by_default())
    return tuple(alarm for alarm in _all_on_alarms(room=True) if alarm[0] not in default)


def alarm_names_by_default() -> list[str]:
    return [name for name, _, _ in _all_on_alarms()]


def alarm_names() -> list[str]:
    """Every alarm a pipeline can make: the default ones, the urgent lane's, the mis-keyed-producer guard's and the
    waiting room's."""
    return (alarm_names_by_default() + [name for name, _, _ in _urgent_lane_alarms()]
            + [name for name, _, _ in _guard_alarms()] + [name for name, _, _ in _room_alarms()])


def alarms() -> str:
    def rows(found: tuple[tuple[str, str, str], ...]) -> list[tuple[str, ...]]:
        return [(f"[`{name}`](../operating.md#{name.lower()})", f"at least {threshold}", description)
                for name, threshold, description in found]

    default, urgent, guard = rows(_all_on_alarms()), rows(_urgent_lane_alarms()), rows(_guard_alarms())
    return (f"{len(default)} alarms with the default props (`alarms=True`, `ses_events`, `outcome_events` and "
            "`quota_watch` on):\n\n" + _table(("alarm", "fires", "what it means"), default)
            + f"\n\nWith `urgent_lane`, {len(urgent)} more (the urgent lane's; see [lanes](../lanes.md)):\n\n"
            + _table(("alarm", "fires", "what it means"), urgent)
            + "\n\nWith `suspected_doubles` and `recipient_cap`, one more each (the mis-keyed-producer guard's; see "
            "[choosing a key](../choosing.md#when-a-key-is-wrong-anyway-the-mis-keyed-producer-guard)):\n\n"
            + _table(("alarm", "fires", "what it means"), guard)
            + "\n\nWith `waiting_room`, two more (the schedule watch's; see "
            "[producing](../producing.md#an-email-for-later)):\n\n"
            + _table(("alarm", "fires", "what it means"), rows(_room_alarms())))


def _sample_ledger_item() -> dict[str, object]:
    from sendonce_contract.schema import SES_EVENT_TYPES, Ledger, Status

    item: dict[str, object] = {Ledger.KEY: {"S": "receipt:8891:u42"}, Ledger.STATUS: {"S": Status.SENT.value},
                               Ledger.SENT_AT: {"N": "1"}, Ledger.EVIDENCE_AT: {"N": "1"},
                               Ledger.SES_MESSAGE_ID: {"S": "first"}, Ledger.SES_MESSAGE_IDS: {"SS": ["first",
                                                                                                   "second"]},
                               Ledger.TENANT: {"S": "acme"}}
    for event in SES_EVENT_TYPES:
        item[event.time_attribute] = {"N": "1"}
        for name in event.outcome_attributes:
            item[name] = {"S": "x"}
    return item


def _sample_stop_item() -> dict[str, object]:
    """A lane's SES stop, learned and over (one write makes both events here; a lane's writes make one each)."""
    from sendonce_contract.schema import SesStopItem

    return {SesStopItem.KEY: {"S": SesStopItem.key("Shop/Receipts", None, "account")},
            SesStopItem.KIND: {"S": "paused"},
            SesStopItem.SCOPE: {"S": "account"}, SesStopItem.LANE: {"S": ""}, SesStopItem.REASON: {"S": "why"},
            SesStopItem.STOPPED_AT: {"N": "1"}, SesStopItem.PROBE_AT: {"N": "2"}, SesStopItem.RESUMED_AT: {"N": "3"}}


def _sample_suspect_item() -> dict[str, object]:
    """A guard's content item whose window saw a second key send the same content."""
    from sendonce_contract.schema import GuardItem

    return {GuardItem.KEY: {"S": GuardItem.content_key("Shop/Receipts", "digest")},
            GuardItem.KIND: {"S": GuardItem.CONTENT}, GuardItem.FIRST_KEY: {"S": "receipt:8891:u42"},
            GuardItem.TENANT: {"S": "acme"}, GuardItem.SUSPECTS: {"SS": ["receipt:8891:u42:retry"]},
            GuardItem.LAST_SUSPECT_AT: {"N": "1"}, GuardItem.WINDOW_ENDS_AT: {"N": "2"}}


def outcome_events() -> str:
    """Each outcome event's detail fields, read off events the publisher's own functions build."""
    from sendonce_contract import outcome_events as events
    from sendonce_contract.schema import Ledger, Status

    built = {event.outcome: event for event in events.transitions(None, _sample_ledger_item(), "Shop/Receipts")}
    for status, attribute in ((Status.UNKNOWN, Ledger.UNKNOWN_AT), (Status.CANCELLED, Ledger.CANCELLED_AT),
                              (Status.EXPIRED, Ledger.FOUND_EXPIRED_AT)):
        image = {Ledger.KEY: {"S": "k"}, Ledger.STATUS: {"S": status.value}, attribute: {"N": "1"}}
        built.update({event.outcome: event for event in events.transitions(None, image, "Shop/Receipts")})
    dead = events.dead_lettered("k", "Shop/Receipts", "ses-refused", "why", "message-id", 1, "acme")
    built[dead.outcome] = dead
    built.update({event.outcome: event for event in events.transitions(None, _sample_stop_item(), "Shop/Receipts")})
    built.update({event.outcome: event for event in events.transitions(None, _sample_suspect_item(),
                                                                       "Shop/Receipts")})
    missing = [outcome for outcome in events.OUTCOME_TYPES if outcome not in built]
    if missing:
        raise LookupError(f"no sample builds these outcome events: {missing}")
    rows = [(f"`{outcome.transition}`", f"`{outcome.detail_type}`",
             ", ".join(f"`{field}`" for field in sorted(built[outcome].detail)))
            for outcome in events.OUTCOME_TYPES]
    return (f"Source `{events.SOURCE}`.\n\n"
            + _table(("transition", "detail-type", "detail fields"), rows))


def message_schema() -> str:
    schema = json.loads((ROOT / "contract" / "sendonce_contract" / "message.schema.json").read_text("utf-8"))
    required = set(schema.get("required", ()))
    rows = []
    for name, spec in schema["properties"].items():
        kind = spec.get("type") or ("see the schema" if "$ref" in spec or "oneOf" in spec else "")
        rows.append((f"`{name}`", "required" if name in required else "optional",
                     " or ".join(kind) if isinstance(kind, list) else str(kind), spec.get("description", "")))
    return _table(("field", "", "JSON type", "rule"), rows)


def _help_of(command: str, words: list[str]) -> str:
    [entry] = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == command]
    main = entry.load()
    out = io.StringIO()
    columns = {"COLUMNS": HELP_COLUMNS}
    with _environment(columns), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*words, "--help"])
    return out.getvalue().rstrip()


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    import os

    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _subcommands(command: str, words: list[str]) -> list[list[str]]:
    """Every command line's words, found in each help text's "{a,b,c}" list of subcommands."""
    found = [words]
    listed = re.search(r"^positional arguments:\n\s+\{([a-z,-]+)\}", _help_of(command, words), re.M)
    for word in (listed.group(1).split(",") if listed else []):
        found += _subcommands(command, [*words, word])
    return found


def _cli(command: str) -> str:
    parts = []
    for words in _subcommands(command, []):
        title = " ".join([command, *words])
        parts.append(f"### `{title}`\n\n```text\n{_help_of(command, words)}\n```")
    return "\n\n".join(parts)


def cli_sendonce() -> str:
    return _cli("sendonce")


def cli_sendonce_local() -> str:
    return _cli("sendonce-local")


def cli_sendonce_outbox_relay() -> str:
    return _cli("sendonce-outbox-relay")


RENDERERS: Mapping[str, Callable[[], str]] = {
    "props": props,
    "props-first": props_first,
    "error-ids": error_ids,
    "warning-ids": warning_ids,
    "metrics": metrics,
    "alarms": alarms,
    "reason-codes": reason_codes,
    "dead-letter-attributes": dead_letter_attributes,
    "copy-attributes": copy_attributes,
    "outcome-events": outcome_events,
    "message-schema": message_schema,
    "cli-sendonce": cli_sendonce,
    "cli-sendonce-local": cli_sendonce_local,
    "cli-sendonce-outbox-relay": cli_sendonce_outbox_relay,
}


def block(name: str) -> str:
    """The block ``name`` as it belongs in a document, markers included."""
    return f"<!-- generated: {name} (make props-docs) -->\n{RENDERERS[name]()}\n<!-- end: {name} -->"


def documents(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for name in DOCUMENTS:
        path = root / name
        found += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    return found


def blocks_in(text: str) -> dict[str, str]:
    return {match["name"]: match.group(0) for match in BLOCK.finditer(text)}


def rewrite(text: str) -> str:
    return BLOCK.sub(lambda match: block(match["name"]), text)


def stale_blocks(text: str) -> list[str]:
    """The names of the blocks of ``text`` that differ from what their declarations render now."""
    return [name for name, found in blocks_in(text).items() if found != block(name)]


# The construct's docstring, rendered from the same declarations.
def _rst(text: str) -> str:
    # Markdown code spans become reStructuredText literals (already doubled ones are kept).
    return re.sub(r"(?<!`)`([^`]+)`(?!`)", r"``\1``", text)


def render_docstring_params() -> str:
    """The ``:param`` lines of ``SendOnceEmailQueue``'s docstring, indented as they sit in the class."""
    from sendonce_constructs.queue_props import declared_props, prop_text

    lines: list[str] = []
    for name, prop in declared_props().items():
        default = prop.default_doc[0].upper() + prop.default_doc[1:]
        text = f":param {name}: {_rst(prop_text(name))}. " + (f"{default}." if prop.default_doc == "required"
                                                               else f"Default: {_rst(prop.default_doc)}.")
        lines += textwrap.wrap(text, DOCSTRING_WIDTH, initial_indent=DOCSTRING_INDENT,
                               subsequent_indent=DOCSTRING_INDENT * 2, break_on_hyphens=False,
                               break_long_words=False)
    return "\n".join(lines) + "\n"


def docstring_params(source: str) -> str:
    """The ``:param`` block as it stands in the construct's module source."""
    match = _PARAMS.search(source)
    return match.group(0) if match else ""


def rewrite_module(source: str) -> str:
    rewritten, count = _PARAMS.subn(lambda _: render_docstring_params(), source, count=1)
    if count != 1:
        raise LookupError("no ':param sender:' block found in the construct's docstring")
    return rewritten


def main(root: Path) -> None:
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        if blocks_in(text):
            path.write_text(rewrite(text), encoding="utf-8")
    module = root / "sendonce_constructs" / "email_queue.py"
    module.write_text(rewrite_module(module.read_text(encoding="utf-8")), encoding="utf-8")
    from tools import resolved_props_source

    package = root / "sendonce_constructs"
    (package / "resolved_props.py").write_text(resolved_props_source.render_resolved_props(), encoding="utf-8")
    (package / "prop_readings.py").write_text(resolved_props_source.render_prop_readings(), encoding="utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=ROOT)
    main(parser.parse_args().root)
    sys.exit(0)
