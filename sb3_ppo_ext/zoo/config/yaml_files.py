"""Bounded reading of YAML files we do not trust (zoo config files, a run's ``config.yml`` / ``args.yml``).

PyYAML's safe loader runs no code, but a small file can still cost unbounded time and memory: a 600-byte "billion
laughs" document (anchors whose aliases repeat each other) loads as shared references, and rl-zoo3 ``pprint``s the
block it reads, which expands it to billions of nodes (minutes, gigabytes, then ``MemoryError``); a deeply nested
document makes the recursive composer fail with ``RecursionError``. :func:`check_yaml_limits` walks the parser's
event stream, which is iterative, and refuses such a document before any Python object is built:

- at most :data:`MAX_YAML_BYTES` bytes in the file;
- at most :data:`MAX_YAML_DEPTH` nested mappings / sequences;
- at most :data:`MAX_YAML_NODES` nodes once every alias is expanded (an alias counts as the whole node it repeats,
  so merge keys ``<<: *defaults`` cost what they copy); recursive aliases are refused;
- at most :data:`MAX_YAML_EXPANDED_CHARACTERS` characters of keys and values once every alias is expanded (an alias of
  one long string costs the string's length, not one node).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

#: Largest YAML file read (1 MiB; the bundled ppo_ext.yml has 5 kB, rl-zoo3's largest config, ppo.yml, 12 kB).
MAX_YAML_BYTES = 1 << 20
#: Deepest nesting of mappings and sequences (rl-zoo3's configs need at most 6 levels).
MAX_YAML_DEPTH = 32
#: Most nodes in a document with every alias expanded (rl-zoo3's ppo.yml, the largest zoo config, has about 1,300).
MAX_YAML_NODES = 100_000
#: Most characters of keys and values (scalars) in a document with every alias expanded: 8 times the largest file, so
#: that merge keys may copy a long ``&defaults`` block many times, but a few thousand aliases of one 640 kB string
#: (which print as gigabytes) are refused.
MAX_YAML_EXPANDED_CHARACTERS = 8 * MAX_YAML_BYTES
#: The loader whose parser walks the events of a document being checked: libyaml's (much faster) where PyYAML was
#: built with it.
_EVENT_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_yaml_limits(text: str, *, where: str) -> None:
    """Raise ``ValueError`` when the YAML ``text`` breaks a limit of this module, without building the document.

    :param text: the YAML document(s).
    :param where: what the text is (a file path), used in the messages.
    """
    if len(text) > MAX_YAML_BYTES:
        raise ValueError(f"{where} is too large: {len(text)} characters, the limit is {MAX_YAML_BYTES}")
    try:
        try:
            _check_events(yaml.parse(text, Loader=_EVENT_LOADER), where=where)
        except yaml.YAMLError:
            if _EVENT_LOADER is yaml.SafeLoader:
                raise
            # libyaml words its errors differently and stops at its own nesting limit: PyYAML's parser reports them.
            _check_events(yaml.parse(text, Loader=yaml.SafeLoader), where=where)
    except yaml.YAMLError as error:
        raise ValueError(f"{where} is not valid YAML: {error}") from None


def _check_events(events: Iterable[yaml.Event], *, where: str) -> None:
    """Walk a YAML event stream and raise ``ValueError`` at the first broken limit (see :func:`check_yaml_limits`);
    a ``yaml.YAMLError`` of the parser passes through."""
    # The [anchor, nodes, characters] of each mapping / sequence being read, and the (nodes, characters) of each
    # anchored node read: an alias costs what its anchor does.
    open_collections: list[list[Any]] = []
    anchor_sizes: dict[str | None, tuple[int, int]] = {}  # by anchor name (an alias event's anchor is its name)
    nodes = characters = 0
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_collections) >= MAX_YAML_DEPTH:
                raise ValueError(
                    f"{where} nests mappings / sequences deeper than {MAX_YAML_DEPTH} levels (line "
                    f"{_line(event)}); the limit is {MAX_YAML_DEPTH}"
                )
            open_collections.append([event.anchor, 1, 0])
            size = (1, 0)
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, collection_nodes, collection_characters = open_collections.pop()
            if anchor is not None:
                anchor_sizes[anchor] = (collection_nodes, collection_characters)
            if open_collections:
                open_collections[-1][1] += collection_nodes
                open_collections[-1][2] += collection_characters
            continue  # its nodes and characters were counted as they came
        elif isinstance(event, yaml.ScalarEvent):
            size = (1, len(event.value))
            if event.anchor is not None:
                anchor_sizes[event.anchor] = size
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _, _ in open_collections):
                raise ValueError(f"{where} has a recursive alias *{event.anchor} (line {_line(event)})")
            size = anchor_sizes.get(event.anchor, (1, 0))  # an undefined alias: the loader reports it
        else:
            continue
        if open_collections and not isinstance(event, yaml.CollectionStartEvent):
            open_collections[-1][1] += size[0]
            open_collections[-1][2] += size[1]
        nodes += size[0]
        characters += size[1]
        if nodes > MAX_YAML_NODES:
            raise ValueError(
                f"{where} expands to more than {MAX_YAML_NODES} YAML nodes once its aliases are expanded (line "
                f"{_line(event)}): the limit is {MAX_YAML_NODES}; repeated aliases of large anchors "
                "(a 'billion laughs' document) are refused"
            )
        if characters > MAX_YAML_EXPANDED_CHARACTERS:
            raise ValueError(
                f"{where} expands to more than {MAX_YAML_EXPANDED_CHARACTERS} characters of keys and values once its "
                f"aliases are expanded (line {_line(event)}): the limit is "
                f"{MAX_YAML_EXPANDED_CHARACTERS}; repeated aliases of a long string are refused"
            )


def _line(event: yaml.Event) -> str:
    """The line of ``event`` in the document, counted from 1 (the parser marks every event it emits)."""
    return str(event.start_mark.line + 1) if event.start_mark is not None else "?"


def read_yaml_text(path: str) -> str:
    """The text of the YAML file ``path``, read once, refused (``ValueError``) beyond :data:`MAX_YAML_BYTES` bytes
    or when it is not UTF-8; a missing file raises ``FileNotFoundError`` as ``open`` does."""
    with open(path, "rb") as file:
        content = file.read(MAX_YAML_BYTES + 1)
    if len(content) > MAX_YAML_BYTES:
        raise ValueError(f"{path} is too large: more than {MAX_YAML_BYTES} bytes, the limit for a YAML file")
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a UTF-8 text file ({error.reason} at byte {error.start})") from None


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a mapping naming one key twice, where PyYAML keeps the last value silently
    (a grid file's task or variant written twice would lose the first entry). A merge key (``<<: *defaults``) is no
    such repeat: the keys it brings in may be overridden."""

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        """PyYAML's composition of a mapping, then its keys checked (a repeated one raises ``ConstructorError``)."""
        node = super().compose_mapping_node(anchor)
        seen: set[tuple[str, str]] = set()
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            if (key.tag, key.value) in seen:
                line = key.start_mark.line + 1 if key.start_mark is not None else "?"
                raise yaml.constructor.ConstructorError(
                    f"names the key {key.value!r} twice in one mapping (line {line}); list it once"
                )
            seen.add((key.tag, key.value))
        return node


def load_yaml(text: str, *, where: str, loader: type[yaml.SafeLoader] = yaml.SafeLoader) -> Any:
    """Check ``text`` with :func:`check_yaml_limits`, then load it with ``loader`` (a ``SafeLoader`` or subclass).

    :raises ValueError: for a broken limit, invalid YAML or a tag the loader does not know (Python tags included).
    """
    if not issubclass(loader, yaml.SafeLoader):
        raise ValueError(f"loader must be yaml.SafeLoader or a subclass of it, got {loader!r}")
    check_yaml_limits(text, where=where)
    try:
        return yaml.load(text, Loader=loader)  # a SafeLoader (subclass): no arbitrary tags
    except yaml.YAMLError as error:
        raise ValueError(f"{where} is not plain YAML: {error}") from None


def load_yaml_file(path: str, *, loader: type[yaml.SafeLoader] = yaml.SafeLoader) -> Any:
    """Read the YAML file ``path`` once (:func:`read_yaml_text`) and load it within the limits (:func:`load_yaml`)."""
    return load_yaml(read_yaml_text(path), where=path, loader=loader)
