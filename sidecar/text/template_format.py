"""What a chat template expects, read from its Jinja syntax tree as vLLM 0.33 reads it.

* ``content_format``: ``"openai"`` when the template loops over a message's content parts
  (directly, through a variable bound to ``message['content']``, or through a macro parameter
  that receives it), else ``"string"``. A port of ``_detect_content_format`` and
  ``_iter_nodes_assign_content_item`` (``vllm/renderers/hf.py``); a regex missed the
  ``render_content`` macro of Qwen3-VL and rendered one token too many per message.
* ``supports_developer``: vLLM's plain substring test for the ``developer`` role.
* ``template_variables``: the template's undeclared variables, the only request
  ``chat_template_kwargs`` vLLM lets through (besides ``apply_chat_template``'s own
  parameters).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

import jinja2
import jinja2.meta
from jinja2 import nodes

ContentFormat = Literal["openai", "string"]


class _Unreadable(Exception):
    """vLLM's detection asserts a plain loop target; when it does not hold, it says "string"."""


def content_format(ast: nodes.Template) -> ContentFormat:
    """The content format vLLM's auto-detection picks for this template."""
    try:
        next(_content_item_loops(ast))
    except (StopIteration, _Unreadable):
        return "string"
    return "openai"


def supports_developer(source: str) -> bool:
    """vLLM keeps ``developer`` messages only when the template names the role."""
    return '"developer"' in source or "'developer'" in source


def template_variables(ast: nodes.Template) -> frozenset[str]:
    """The variables the template reads without setting them."""
    return frozenset(jinja2.meta.find_undeclared_variables(ast))


def _is_var(node: nodes.Node, name: str) -> bool:
    if isinstance(node, nodes.Name):
        return node.ctx == "load" and node.name == name
    if isinstance(node, nodes.Getattr) and "." in name:  # ``ns.rest`` for the alias "ns.rest"
        base, _, attr = name.rpartition(".")
        return node.attr == attr and _is_var(node.node, base)
    return False


def _is_attr(node: nodes.Node, name: str, key: str) -> bool:
    if isinstance(node, nodes.Getitem):
        return (
            _is_var(node.node, name) and isinstance(node.arg, nodes.Const) and node.arg.value == key
        )
    if isinstance(node, nodes.Getattr):
        return _is_var(node.node, name) and node.attr == key
    return False


def _is_var_or_elems(node: nodes.Node, name: str, key: str | None = None) -> bool:
    """``name`` (or ``name[key]``), possibly filtered, tested or sliced."""
    if isinstance(node, nodes.Filter):
        return node.node is not None and _is_var_or_elems(node.node, name, key)
    if isinstance(node, nodes.Test):
        return _is_var_or_elems(node.node, name, key)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return _is_var_or_elems(node.node, name, key)
    return _is_attr(node, name, key) if key else _is_var(node, name)


def _aliases_of(root: nodes.Template, name: str) -> Iterator[str]:
    """``name`` and every variable or namespace attribute assigned from it, transitively."""
    yield name
    seen, todo = {name}, deque([name])
    while todo:
        current = todo.popleft()
        for assign in root.find_all(nodes.Assign):
            lhs, rhs = assign.target, assign.node
            found: list[str] = []
            if isinstance(lhs, nodes.Name) and _is_var_or_elems(rhs, current):
                found.append(lhs.name)
            if (
                isinstance(lhs, nodes.Name)
                and isinstance(rhs, nodes.Call)
                and isinstance(rhs.node, nodes.Name)
                and rhs.node.name == "namespace"
            ):
                found += [
                    f"{lhs.name}.{kw.key}"
                    for kw in rhs.kwargs
                    if _is_var_or_elems(kw.value, current)
                ]
            elif isinstance(lhs, nodes.NSRef) and _is_var_or_elems(rhs, current):
                # ``{% set ns.rest = messages %}``: Jinja's only attribute assignment.
                found.append(f"{lhs.name}.{lhs.attr}")
            for alias in found:
                yield alias
                if alias not in seen:
                    seen.add(alias)
                    todo.append(alias)


def _message_names(root: nodes.Template) -> list[str]:
    """Loop targets of ``for message in messages`` (or an alias of ``messages``)."""
    names = list(_aliases_of(root, "messages"))
    found = []
    for loop in root.find_all(nodes.For):
        if any(_is_var_or_elems(loop.iter, name) for name in names):
            found.append(_target(loop))
    return found


def _target(loop: nodes.For) -> str:
    if not isinstance(loop.target, nodes.Name):
        raise _Unreadable
    return loop.target.name


def _macro_content_params(
    root: nodes.Template, messages: list[str]
) -> tuple[set[int], dict[int, set[str]]]:
    """Loops inside macros, and for each the macro parameters that receive message content."""
    in_macros: set[int] = set()
    by_loop: dict[int, set[str]] = {}
    for macro in root.find_all(nodes.Macro):
        params = {arg.name for arg in macro.args}
        content_params: set[str] = set()
        for call in root.find_all(nodes.Call):
            if not (isinstance(call.node, nodes.Name) and call.node.name == macro.name):
                continue
            for i, arg in enumerate(call.args):
                if i < len(macro.args) and any(
                    _is_var_or_elems(arg, m, "content") for m in messages
                ):
                    content_params.add(macro.args[i].name)
            for kwarg in call.kwargs:
                if kwarg.key in params and any(
                    _is_var_or_elems(kwarg.value, m, "content") for m in messages
                ):
                    content_params.add(kwarg.key)
        for loop in macro.find_all(nodes.For):
            in_macros.add(id(loop))
            if content_params:
                by_loop[id(loop)] = content_params
    return in_macros, by_loop


def _content_item_loops(root: nodes.Template) -> Iterator[nodes.For]:
    """Loops over a message's content: ``message['content']``, a macro parameter bound to it,
    or a variable named ``content`` outside any macro."""
    messages = _message_names(root)
    in_macros, by_loop = _macro_content_params(root, messages)
    for loop in root.find_all(nodes.For):
        over_content = any(_is_var_or_elems(loop.iter, m, "content") for m in messages)
        over_param = isinstance(loop.iter, nodes.Name) and (
            loop.iter.name in by_loop.get(id(loop), ())
            or (id(loop) not in in_macros and loop.iter.name == "content")
        )
        if over_content or over_param:
            _target(loop)
            yield loop
