"""The reference pages of docs/reference/ and params.schema.json, written from the code, never by hand:

    python -m drift.cli.reference_docs            write them
    python -m drift.cli.reference_docs --check    exit 1 naming each file that differs from what this writes

cli.md from the Typer app, params.md and params.schema.json from params.yaml's pydantic schema (each dataset's
section typed by its reader's PARAMS; the stages a key re-runs from drift/run/pipeline.py), models.md and
encoders.md from the registries, results.md from the committed metrics of the default run. The inputs are read
from `source` (the repository), the files written under `out` (the repository by default): `pages` returns
them all, the same bytes for the same code and metrics."""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import io
import json
import re
import sys
import tokenize
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from pydantic_core import to_jsonable_python

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python -m drift.cli.reference_docs"
REFERENCE = "docs/reference"
SCHEMA = "params.schema.json"
GENERATED = f"Written by `{COMMAND}` from the code; edit the code, not this file."


# ---------------------------------------------------------------- Markdown


def _outside_code(text: str, change) -> str:
    """`text` with `change` applied to what lies outside its `code spans`."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") and part.endswith("`") else change(part) for part in parts)


def prose(text: str) -> str:
    """Plain text as Markdown prose: `<name>`, `*` and an index `[i]` shown as written, never read as HTML,
    emphasis or a link reference; a link `[text](target)` stays a link."""
    return _outside_code(
        text,
        lambda part: re.sub(
            r"\[([^\]]*)\](?!\()", r"\\[\1\\]", part.replace("<", "&lt;").replace("*", r"\*")
        ),
    )


def cell(text: str) -> str:
    """Plain text as one table cell: prose on one line, its pipes escaped (a code span holding one is
    unquoted, since a table's escape does not reach inside code)."""
    text = re.sub(r"`([^`]*\|[^`]*)`", r"\1", " ".join(text.split()))
    return prose(text).replace("|", r"\|")


def code(value: str) -> str:
    return f"`{value}`" if value else ""


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]


def yaml_value(value: Any) -> str:
    """A value as params.yaml writes it, on one line (flow style)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True, exclude_none=True)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and (
        not value or not re.fullmatch(r"[\w./:{}@+?=&%~-]+", value) or value[0] in "{@"
    ):
        return json.dumps(value)
    return str(value)


def first_sentence(text: str | None) -> str:
    """The first sentence of a docstring, on one line."""
    text = " ".join((text or "").split("\n\n")[0].split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


# ---------------------------------------------------------------- cli.md


TYPE_WORDS = {"str": "text", "int": "integer", "float": "number", "bool": "flag", "Path": "path"}


def _param_type(param) -> str:
    """A parameter's type in words (a repeatable one's: of each value)."""
    described = param.type_descriptor
    if described.is_choice:
        return "one of " + ", ".join(code(str(c)) for c in described.choices or ())
    if getattr(param, "is_flag", False):
        return "flag"
    bare = param.bare_type()
    item = re.fullmatch(r"list\[(\w+)\]", bare)
    return TYPE_WORDS.get(item.group(1) if item else bare, bare)


def _param_default(param) -> str:
    if param.required:
        return "required"
    default = param.default
    if default is None or default == [] or (getattr(param, "is_flag", False) and default is False):
        return ""
    if getattr(param, "is_flag", False):
        return code(param.opts[0]) if default is True else ""
    return code(str(default))


def _usage(path: str, command) -> str:
    pieces = [path]
    if command.params and any(p.param_type_name == "option" and not p.hidden for p in command.params):
        pieces.append("[OPTIONS]")
    for param in command.params:
        if param.param_type_name != "argument":
            continue
        name = param.name.upper() + ("..." if param.nargs == -1 else "")
        pieces.append(name if param.required else f"[{name}]")
    if hasattr(command, "list_commands"):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def _parameters(command) -> list[str]:
    rows = []
    for param in command.params:
        if param.hidden:
            continue
        if param.param_type_name == "argument":
            name = code(param.name.upper())
        else:
            name = ", ".join(code(o) for o in [*param.opts, *param.secondary_opts])
        help = param.help or ""
        if param.multiple or (param.param_type_name == "argument" and param.nargs == -1):
            help += " (repeatable)" if param.param_type_name == "option" else " (one or more)"
        rows.append([name, param.param_type_name, _param_type(param), _param_default(param), cell(help)])
    if not rows:
        return []
    return table(["name", "kind", "type", "default", "help"], rows)


def _commands(group, context, path: str) -> Iterator[tuple[str, Any]]:
    """(command path, command) for `group` and every command under it, as the app lists them."""
    import typer

    yield path, group
    for name in group.list_commands(context) if hasattr(group, "list_commands") else ():
        command = group.get_command(context, name)
        if command is not None and not command.hidden:
            below = typer.Context(command, info_name=name, parent=context)
            yield from _commands(command, below, f"{path} {name}")


def cli_page() -> str:
    """docs/reference/cli.md: every command and sub-command of `drift`, its help, arguments and options."""
    import typer

    from drift.cli import app

    root = typer.main.get_command(app)
    commands = list(_commands(root, typer.Context(root, info_name="drift"), "drift"))
    out = ["# Command-line reference", "", GENERATED + " `drift <command> --help` prints the same.", ""]
    out += table(
        ["command", "what"],
        [[code(path), cell(command.get_short_help_str(limit=10_000))] for path, command in commands[1:]],
    )
    for path, command in commands:
        out += [f"## `{path}`", "", prose(inspect.cleandoc(command.help or "")), ""]
        out += ["```", _usage(path, command), "```", ""]
        out += _parameters(command)
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------- params.schema.json


BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def _standard_bounds(node: Any) -> None:
    """pydantic writes a bound on a validated number (Float: a number read from a string too) as `ge`, `gt`,
    `le`, `lt`; JSON Schema names them minimum, exclusiveMinimum, maximum, exclusiveMaximum."""
    if isinstance(node, dict):
        if node.get("type") in ("number", "integer"):
            for short, standard in BOUNDS.items():
                if isinstance(node.get(short), (int, float)):
                    node[standard] = node.pop(short)
        for value in node.values():
            _standard_bounds(value)
    elif isinstance(node, list):
        for value in node:
            _standard_bounds(value)


def _section_models() -> dict[str, type[BaseModel]]:
    """Each built-in dataset's section model (its reader's PARAMS), by dataset name."""
    from drift.core.dataset_registry import DATASETS
    from drift.data.datasets import get_dataset

    return {name: get_dataset(name).PARAMS for name in DATASETS}


def _table_model() -> type[BaseModel]:
    from drift.data.datasets.table import TableParams

    return TableParams


def _section_class(annotation: Any) -> type[BaseModel] | None:
    """The Section a field holds (itself or in `X | None`), else None."""
    from drift.core.params import Section

    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [_section_class(a) for a in typing.get_args(annotation)]
        return next((f for f in found if f is not None), None)
    return annotation if isinstance(annotation, type) and issubclass(annotation, Section) else None


def _default(model: type[BaseModel], name: str) -> Any:
    field = model.model_fields[name]
    return None if field.is_required() else field.get_default(call_default_factory=True)


def params_schema() -> dict:
    """params.schema.json: the JSON Schema of params.yaml, for editors (yaml-language-server) to complete keys
    and flag typos. pydantic writes it from Params and each dataset's section model; then each dataset's
    section takes its model (without `source`, which `datasets.<name>.input` fills, and with the `train` /
    `embed` it may override), any other top-level key is a table of your own (`kind: table`), and defaults
    made by a factory are written out. Checks that need the code (names of the registries, combinations) stay
    with `drift check`."""
    from drift.core.params import OVERRIDABLE, Params, _Params

    sections = _section_models()
    models: list[type[BaseModel]] = [Params, *sections.values(), _table_model()]
    _, document = models_json_schema([(m, "validation") for m in models])
    defs = document["$defs"]
    for model in _models_below(models):
        properties = defs.get(model.__name__, {}).get("properties", {})
        for name, field in model.model_fields.items():
            key = field.alias or name
            if key not in properties:
                continue
            described = _field_description(model, name)
            if described and "description" not in properties[key]:
                properties[key]["description"] = described
            if field.default_factory is not None and "default" not in properties[key]:
                value = _default(model, name)
                if not isinstance(value, BaseModel):
                    properties[key]["default"] = to_jsonable_python(value)
    # a dataset's own `train:` / `embed:`, the sections it may override
    overridable = {key: {"$ref": f"#/$defs/{_section_name(_Params, key)}"} for key in OVERRIDABLE}
    for model in [*sections.values(), _table_model()]:
        section = defs[model.__name__]
        section["properties"].pop("source", None)
        required = [key for key in section.pop("required", []) if key != "source"]
        if required:
            section["required"] = required
        section["properties"].update(overridable)
    top = defs.pop("Params")
    for key in ("tables", "overrides"):  # what load_params derives, never a key of the file
        top["properties"].pop(key)
    for dataset, model in sections.items():
        top["properties"][dataset] = {
            "$ref": f"#/$defs/{model.__name__}",
            "description": first_sentence(sys.modules[model.__module__].__doc__),
        }
    table_model = defs[_table_model().__name__]
    table_model["required"] = sorted({*table_model.get("required", []), "kind"})
    top["additionalProperties"] = {
        "$ref": f"#/$defs/{_table_model().__name__}",
        "description": "a table of your own: a name of `datasets` whose section says `kind: table` (drift init)",
    }
    _standard_bounds(defs)
    _standard_bounds(top)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "params.yaml",
        "description": f"{first_sentence(sys.modules[_Params.__module__].__doc__)} {GENERATED}",
        **{k: v for k, v in top.items() if k not in ("title", "description")},
        "$defs": dict(sorted(defs.items())),
    }


def _section_name(model: type[BaseModel], key: str) -> str:
    """The class name (the $defs key) of the section `model` holds at `key`."""
    section = _section_class(model.model_fields[key].annotation)
    assert section is not None, f"{model.__name__}.{key} is no section"
    return section.__name__


def _models_below(models: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """`models` and every Section their fields hold, each once."""
    found: dict[type[BaseModel], None] = {}
    todo = list(models)
    while todo:
        model = todo.pop(0)
        if model in found:
            continue
        found[model] = None
        for field in model.model_fields.values():
            for annotation in [field.annotation, *typing.get_args(field.annotation)]:
                below = _section_class(annotation)
                if below is not None:
                    todo.append(below)
    return list(found)


# ---------------------------------------------------------------- descriptions from the source


@functools.cache
def _module_comments(path: str) -> dict[str, dict[str, str]]:
    """class name -> field name -> the comments of the field's statement in the module at `path`: those right
    above it (a block of comment lines) and those within its lines, in order."""
    source = Path(path).read_text()
    lines = source.splitlines()
    comments: dict[int, tuple[str, bool]] = {}  # line -> (text, the line holds nothing else)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            alone = not lines[token.start[0] - 1][: token.start[1]].strip()
            comments[token.start[0]] = (token.string.lstrip("#").strip(), alone)
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields = found.setdefault(node.name, {})
        for statement in node.body:
            if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
                continue
            above: list[str] = []
            line = statement.lineno - 1
            while line in comments and comments[line][1]:
                above.insert(0, comments[line][0])
                line -= 1
            end = statement.end_lineno or statement.lineno
            within = [comments[n][0] for n in range(statement.lineno, end + 1) if n in comments]
            text = " ".join(above + within).strip()
            if text:
                fields[statement.target.id] = text
    return found


def _class_comments(cls: type) -> dict[str, str]:
    """field name -> its comments in `cls`'s source (none for a class made by a call, as create_model's)."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return _module_comments(path).get(cls.__qualname__, {}) if path else {}


def _field_description(model: type[BaseModel], name: str) -> str:
    """A field's Field(description=...), else the comments of the first class of `model`'s MRO whose source
    writes them for it."""
    field = model.model_fields[name]
    if field.description:
        return field.description
    for cls in model.__mro__:
        if issubclass(cls, BaseModel) and name in cls.__dict__.get("__annotations__", {}):
            text = _class_comments(cls).get(name)
            if text:
                return text
    return ""


def yaml_comments(path: Path) -> dict[str, str]:
    """dotted key -> the comment params.yaml writes for it: the one on its line (with the comment lines below
    it in the same column, which continue it), else the comment lines right above it at its indentation. A key
    of a flow mapping (`{unit: year, ...}`) has none of its own. Read with ruamel.yaml, which knows each key's
    line."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    text = path.read_text()
    lines = text.splitlines()
    document = YAML().load(text)
    found: dict[str, str] = {}

    def comment_only(n: int) -> re.Match | None:
        return re.match(r"(\s*)#\s?(.*)$", lines[n]) if 0 <= n < len(lines) else None

    def walk(node: CommentedMap, prefix: str) -> None:
        for key, value in node.items():
            line, column = node.lc.key(key)
            own_line = len(lines[line]) - len(lines[line].lstrip()) == column
            inline = re.search(r"\s#\s?(.*)$", lines[line])
            parts: list[str] = []
            if own_line and inline:
                parts.append(inline.group(1))
                next_line = line + 1
                while (below := comment_only(next_line)) and len(below.group(1)) == inline.start() + 1:
                    parts.append(below.group(2))
                    next_line += 1
            elif own_line:
                above_line = line - 1
                while (above := comment_only(above_line)) and len(above.group(1)) == column:
                    parts.insert(0, above.group(2))
                    above_line -= 1
            described = " ".join(p.strip() for p in parts).strip()
            described = re.sub(r"^-+\s*", "", described)
            if described:
                found[f"{prefix}{key}"] = described
            if isinstance(value, CommentedMap):
                walk(value, f"{prefix}{key}.")

    if isinstance(document, CommentedMap):
        walk(document, "")
    return found


# ---------------------------------------------------------------- params.md


def stage_params() -> dict[str, list[str]]:
    """stage -> the params.yaml keys it depends on: its dvc.yaml `params:` (`<dataset>` for a dataset's own
    section, `train.models.<dataset>`), `datasets.<dataset>.input` for a raw input it reads, and `encoders`
    for the declarations the check stage records for its embed (data/checked/<dataset>.embed.json)."""
    from drift.run.pipeline import STAGES

    out = {}
    for name, stage in STAGES.items():
        keys = [p.replace("${key}", "<dataset>") for p in stage["params"]]
        keys += [
            f"datasets.<dataset>.{e[len('${item.') : -1]}"
            for e in stage.get("extra", [])
            if e.startswith("${item.")
        ]
        # the declarations of the encoders it runs, which the check stage records
        # (drift.run.checks.embed_record)
        if "checked_embed" in stage["inputs"]:
            keys.append("encoders")
        if "checked_train" in stage["inputs"]:
            keys.append("models")
        out[name] = keys
    return out


def _reruns(key: str, stages: dict[str, list[str]]) -> str:
    """The stages whose params name `key`, a section holding it, or a key below it."""
    names = [
        stage
        for stage, params in stages.items()
        if any(key == p or key.startswith(p + ".") or p.startswith(key + ".") for p in params)
    ]
    return ", ".join(names) if names else "none"


@dataclass
class Row:
    key: str  # dotted, `<dataset>` / `<name>` where the file writes a name
    type: str
    default: str
    description: str


def _resolve(schema: dict, defs: dict) -> dict:
    while "$ref" in schema:
        schema = {
            **defs[schema["$ref"].rsplit("/", 1)[1]],
            **{k: v for k, v in schema.items() if k != "$ref"},
        }
    return schema


def _number_bounds(schema: dict) -> str:
    low = (str(schema["minimum"]), "[") if "minimum" in schema else None
    low = (str(schema["exclusiveMinimum"]), "(") if "exclusiveMinimum" in schema else low
    high = (str(schema["maximum"]), "]") if "maximum" in schema else None
    high = (str(schema["exclusiveMaximum"]), ")") if "exclusiveMaximum" in schema else high
    if low and high:
        return f" in {low[1]}{low[0]}, {high[0]}{high[1]}"
    if low:
        return f" {'≥' if low[1] == '[' else '>'} {low[0]}"
    if high:
        return f" {'≤' if high[1] == ']' else '<'} {high[0]}"
    return ""


def _inner(schema: dict, defs: dict) -> str:
    """type_words of an item or value, in parentheses when it is a choice of several."""
    words = type_words(schema, defs)
    return f"({words})" if " or " in words else words


def type_words(schema: dict, defs: dict) -> str:
    """A JSON Schema node in words: its type, choices and bounds."""
    schema = _resolve(schema, defs)
    if "anyOf" in schema:
        return " or ".join(dict.fromkeys(type_words(s, defs) for s in schema["anyOf"]))
    if "enum" in schema:
        return "one of " + ", ".join(code(str(v)) for v in schema["enum"])
    if "const" in schema:
        return code(str(schema["const"]))
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return f"{kind}{_number_bounds(schema)}"
    if kind == "string":
        return "non-empty string" if schema.get("minLength") else "string"
    if kind == "boolean":
        return "true or false"
    if kind == "null":
        return "null"
    if kind == "array":
        words = f"list of {_inner(schema.get('items', {}), defs)}"
        if "minItems" in schema and schema.get("maxItems") == schema["minItems"]:
            words += f", {schema['minItems']} items"
        elif "minItems" in schema:
            words += f", at least {schema['minItems']}"
        return words
    if kind == "object":
        value = schema.get("additionalProperties")
        if isinstance(value, dict) and value and "properties" not in schema:
            return f"mapping of {_inner(value, defs)}"
        return "mapping"
    return "any"


class ParamsPage:
    """The rows of params.md: every key of the schema, described from the code, else the shipped params.yaml."""

    def __init__(self, source: Path, schema: dict):
        self.schema = schema
        self.defs = self.schema["$defs"]
        self.comments = yaml_comments(source / "params.yaml")
        self.stages = stage_params()

    def rows(self, model: type[BaseModel], prefix: str, defaults: Any = None) -> Iterator[Row]:
        """The keys of section `model` at `prefix` (its default values from `defaults`, an instance, if
        given), the sections inside it expanded after their own row."""
        from drift.core.params import DatasetEntry, SaliencyGrid

        properties = _resolve({"$ref": f"#/$defs/{model.__name__}"}, self.defs)["properties"]
        for name, field in model.model_fields.items():
            key = field.alias or name
            if key not in properties:  # `source`: filled from datasets.<name>.input
                continue
            if field.is_required():
                default = "required"
                value = None
            else:
                value = getattr(defaults, name) if defaults is not None else _default(model, name)
                default = code(yaml_value(value))
            below = _section_class(field.annotation)
            described = (
                _field_description(model, name)
                or (below.__doc__ if below is not None else "")
                or self.comments.get(f"{prefix}{key}", "")
            )
            if below is not None and value is not None:
                default = "its keys below"
            yield Row(f"{prefix}{key}", type_words(properties[key], self.defs), default, described)
            if below is not None:
                yield from self.rows(below, f"{prefix}{key}.", value if isinstance(value, below) else None)
            inner = typing.get_args(field.annotation)
            if typing.get_origin(field.annotation) is dict and inner[1] in (SaliencyGrid, DatasetEntry):
                yield from self.rows(inner[1], f"{prefix}{key}.<dataset>.")

    def section(self, title: str, intro: str, rows: list[Row], dataset: str | None = None) -> list[str]:
        out = [f"## {title}", "", prose(intro), ""] if intro else [f"## {title}", ""]
        body = []
        for row in rows:
            where = row.key.replace(f"{dataset}.", "<dataset>.", 1) if dataset else row.key
            body.append(
                [
                    code(row.key),
                    cell(row.type),
                    row.default,
                    _reruns(where, self.stages),
                    cell(row.description),
                ]
            )
        return out + table(["key", "type", "default", "re-runs", "description"], body)

    def page(self) -> str:
        from drift.core.dataset_registry import DATASETS
        from drift.core.params import OVERRIDABLE, DatasetEntry, Params, _Params

        out = [
            "# params.yaml reference",
            "",
            f"{GENERATED} Every key of params.yaml, from its pydantic schema (drift/core/params.py; a dataset's "
            "section from its reader's params class in drift/data/datasets/). The description is the field's "
            "own comment in that code; where the code has none, the comment beside the key in the shipped "
            "params.yaml. Re-runs: the stages whose dvc.yaml `params:` name the key or a section holding it "
            "(drift/run/pipeline.py; the stages after them re-run when their inputs change; the `check` stage "
            "reads the whole file on every run). Editors complete and check keys with params.schema.json "
            "(first line of params.yaml); `drift check` checks what a schema cannot (names, combinations).",
            "",
        ]
        out += self.section(
            "datasets",
            first_sentence(DatasetEntry.__doc__),
            [
                Row("datasets", "mapping", "required", "the datasets this pipeline runs, name -> {input}"),
                *self.rows(DatasetEntry, "datasets.<dataset>."),
            ],
        )
        for dataset, model in _section_models().items():
            info = DATASETS[dataset]
            described = first_sentence(sys.modules[model.__module__].__doc__)
            intro = (
                f"{described} Task: {info.task}, {info.modality}; its section is typed by `{model.__name__}` in "
                f"drift/data/datasets/{info.module}.py, its reader."
            )
            out += self.section(f"`{dataset}`", intro, list(self.rows(model, f"{dataset}.")), dataset)
        table_model = _table_model()
        out += self.section(
            "A table of your own: `<name>`",
            f"{first_sentence(table_model.__doc__)} `drift init <name> <file>` writes it.",
            list(self.rows(table_model, "<name>.")),
            "<name>",
        )
        out += [
            "## A dataset's own `train` and `embed`",
            "",
            prose(
                f"A dataset's section may hold {' and '.join(f'`{k}:`' for k in OVERRIDABLE)} mappings: the keys "
                "of those sections below, laid over them for that dataset alone (`<dataset>.train.epochs: 20`). "
                "They are part of the dataset's section, so they re-run what its section re-runs."
            ),
            "",
        ]
        for name, field in _Params.model_fields.items():
            below = _section_class(field.annotation)
            if below is None or name == "datasets":
                continue
            intro = inspect.cleandoc(below.__doc__) if below.__doc__ else self.comments.get(name, "")
            out += self.section(f"`{name}`", " ".join(intro.split()), list(self.rows(below, f"{name}.")))
        properties = self.schema["properties"]
        declared = [
            Row(key, type_words(properties[key], self.defs), code(yaml_value(_default(Params, key))), text)
            for key, text in (
                (
                    "encoders",
                    "frozen encoders of your own, name -> declaration: see [encoders.md](encoders.md)",
                ),
                ("models", "heads of your own, name -> {family, size arguments}: see [models.md](models.md)"),
            )
        ]
        out += self.section(
            "Declarations: `encoders` and `models`", _field_description(_Params, "encoders"), declared
        )
        return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------- models.md, encoders.md


def models_page() -> str:
    """docs/reference/models.md: the built-in heads with their size arguments, the families a head of your own
    is declared from, the probes and the references (not the heads or encoders a params.yaml declares)."""
    from drift.core.model_registry import ALIASES, DECLARED, FAMILIES, MODELS, declared_probes

    shipped = [
        info for name, info in MODELS.items() if name not in DECLARED and name not in declared_probes()
    ]
    heads = [i for i in shipped if i.family not in ("Frozen", "Reference")]
    out = ["# Models", "", GENERATED + " `drift models` prints the same with parameter counts.", ""]
    out += ["## Heads", "", prose("Trained from scratch on each cutoff; the paper's S / M / L sizes."), ""]
    out += table(
        ["model", "paper name", "family", "size", "input", "dropout", "size arguments"],
        [
            [
                code(i.name),
                cell(i.display),
                i.family,
                i.size,
                i.input,
                "yes" if i.dropout else "no",
                cell(
                    ", ".join(f"{k}: {yaml_value(list(v) if isinstance(v, tuple) else v)}" for k, v in i.args)
                ),
            ]
            for i in heads
        ],
    )
    out += [
        "## Families: heads of your own",
        "",
        prose(
            "params.yaml `models:` declares a head as `<name>: {family: <family>, <argument>: <value>, ...}`; "
            "an argument left out takes its default."
        ),
        "",
    ]
    out += table(
        ["family", "paper family", "input", "dropout", "argument", "type", "default", "allowed"],
        [
            [
                code(key) if n == 0 else "",
                family.family if n == 0 else "",
                family.input if n == 0 else "",
                ("yes" if family.dropout else "no") if n == 0 else "",
                code(arg),
                rule.type,
                code(yaml_value(list(rule.default) if isinstance(rule.default, tuple) else rule.default)),
                cell(rule.wants()),
            ]
            for key, family in FAMILIES.items()
            for n, (arg, rule) in enumerate(family.args.items())
        ],
    )
    aliases = {target: alias for alias, target in ALIASES.items()}
    out += [
        "## Probes",
        "",
        prose("A linear probe on a frozen encoder's pooled vector ([encoders.md](encoders.md))."),
        "",
    ]
    out += table(
        ["model", "paper name", "input", "also named"],
        [
            [code(i.name), cell(i.display), i.input, code(aliases.get(i.name, ""))]
            for i in shipped
            if i.family == "Frozen"
        ],
    )
    out += ["## References", "", prose("In every dataset's matrix (`train.baselines`), not ranked."), ""]
    out += table(
        ["model", "name in tables", "input"],
        [[code(i.name), cell(i.display), i.input] for i in shipped if i.family == "Reference"],
    )
    return "\n".join(out).rstrip() + "\n"


def encoders_page() -> str:
    """docs/reference/encoders.md: the built-in frozen encoders and the fields of a declaration of your own."""
    from drift.core.encoder_registry import ENCODER_PARAMS, ENCODERS, FIELDS, LIBRARIES

    shipped = [spec for spec in ENCODERS.values() if not spec.declared]
    out = ["# Encoders", "", GENERATED + " `drift models --encoders` prints the same.", ""]
    out += [
        prose(
            "Frozen encoders: each feeds its `probe-<encoder>`; the text encoder (`embed.text_encoder`) also "
            "feeds the text heads its token states. Their weights come from the Hugging Face cache or "
            "`embed.weights.<encoder>`, never from the network at run time."
        ),
        "",
    ]
    out += table(
        ["encoder", "paper name", "kind", "library", "id", "width", "pooling", "input", "frozen parameters"],
        [
            [
                code(s.name),
                cell(s.display),
                s.modality,
                s.library,
                code(s.hub_id),
                str(s.dim),
                s.pooling,
                f"{s.image_size}x{s.image_size} pixels"
                if s.modality == "image"
                else f"up to {s.positions} tokens",
                f"{ENCODER_PARAMS[s.name]:,}" if s.name in ENCODER_PARAMS else "",
            ]
            for s in shipped
        ],
    )
    torchvision = [s for s in shipped if s.torchvision]
    if torchvision:
        out += [
            prose(
                "Also served by torchvision (`embed.image_source.<encoder>: torchvision`): "
                + ", ".join(f"`{s.name}` as `{s.torchvision}`" for s in torchvision)
                + "."
            ),
            "",
        ]
    out += [
        "## Encoders of your own",
        "",
        prose(
            "params.yaml `encoders:` declares one as `<name>: {library: <library>, id: <id or local folder>, ...}` "
            f"with the fields {', '.join(f'`{f}`' for f in FIELDS)}; its width, positions and image size are "
            "read from its own config."
        ),
        "",
    ]
    out += table(
        ["library", "poolings (the first: the default)"],
        [
            [code(library), ", ".join(code(p) for p in poolings)]
            for library, (_, poolings) in LIBRARIES.items()
        ],
    )
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------- results.md


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _margin(value: float | None) -> str:
    return "" if value is None else f"{value:+.3f}".replace("-", "−")


def results_page(source: Path) -> str:
    """docs/reference/results.md: the default run's results (the datasets of the shipped params.yaml, from the
    committed metrics/<dataset>/<model>.json), as `drift summary` ranks them: by Decay, references after."""
    from drift.core.params import read_yaml
    from drift.protocol.summary import REFERENCES
    from drift.report.results import load_results, summary_rows

    declared = list((read_yaml(source / "params.yaml") or {}).get("datasets") or {})
    results = load_results(source / "metrics", declared=declared)
    out = [
        "# Results of the default run",
        "",
        prose(
            f"{GENERATED} From the committed metrics/<dataset>/<model>.json of the shipped params.yaml's datasets, "
            "as `drift summary` shows them: models ranked by Decay (smallest first), the references after them in "
            "italics, unranked. vs prior / linear / tfidf: the model's ID margin over that reference (positive = "
            "better)."
        ),
        "",
    ]
    for dataset in [d for d in declared if d in results]:
        rows = summary_rows(results[dataset], "decay")
        first = rows[0]
        present = [key for key, name in REFERENCES.items() if name in results[dataset]]
        seeds = f"{first['seeds']} seed{'s' if first['seeds'] != 1 else ''}"
        out += [f"## {dataset}", "", f"K = {first['k']} slices, {seeds}.", ""]
        body = []
        for row in rows:
            name = f"*{row['model']}*" if row["reference"] else row["model"]
            margins = ["" if row["reference"] else _margin(row.get(f"margin_{key}")) for key in present]
            body.append([name, _score(row["id"]), _score(row["future"]), _score(row["decay"]), *margins])
        out += table(
            [f"{dataset} ({first['metric']})", "ID", "Future", "Decay", *(f"vs {k}" for k in present)], body
        )
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------- the files


# the drift matrix the documentation's home page shows: a copy of a committed figure of the default run
PICTURE, PICTURE_SOURCE = "docs/assets/drift-matrix.png", "plots/synth-portraits/cnn-s/heatmap.png"


def pages(source: Path = ROOT) -> dict[str, str | bytes]:
    """Every generated file, path relative to the repository -> its text (bytes for the picture); inputs read
    under `source`."""
    schema = params_schema()
    return {
        f"{REFERENCE}/cli.md": cli_page(),
        f"{REFERENCE}/params.md": ParamsPage(source, schema).page(),
        f"{REFERENCE}/models.md": models_page(),
        f"{REFERENCE}/encoders.md": encoders_page(),
        f"{REFERENCE}/results.md": results_page(source),
        SCHEMA: json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
        PICTURE: (source / PICTURE_SOURCE).read_bytes(),
    }


def _as_bytes(content: str | bytes) -> bytes:
    return content if isinstance(content, bytes) else content.encode()


def write(out: Path = ROOT, source: Path = ROOT) -> list[str]:
    """Write every generated file under `out`; returns the paths written."""
    written = pages(source)
    for path, content in written.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(_as_bytes(content))
    return list(written)


def stale(out: Path = ROOT, source: Path = ROOT) -> list[str]:
    """The generated files under `out` that are missing or differ from what `write` would write."""
    return [
        path
        for path, content in pages(source).items()
        if not (out / path).exists() or (out / path).read_bytes() != _as_bytes(content)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    parser.add_argument("--out", type=Path, default=ROOT, help="where the files go (default: the repository)")
    args = parser.parse_args(argv)
    if args.check:
        found = stale(args.out)
        if found:
            print(f"stale: {', '.join(found)}: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    for path in write(args.out):
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
