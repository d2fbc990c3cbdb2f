"""text.template_format: the content format, developer role and template variables vLLM reads
from a chat template's syntax tree (the expectations are what vLLM 0.33's
``_detect_content_format`` returns for the same templates)."""

from __future__ import annotations

import jinja2.sandbox
import pytest

from sidecar.text.template_format import content_format, supports_developer, template_variables
from tests.support.paths import DATA, ROOT

ENV = jinja2.sandbox.ImmutableSandboxedEnvironment(extensions=["jinja2.ext.loopcontrols"])
QWEN2 = (DATA / "qwen2_vl_chat_template.jinja").read_text()
QWEN3 = (ROOT / "tests" / "real_vllm" / "qwen3_vl_chat_template.jinja").read_text()
MACRO = "{% macro r(x) %}{% for i in x %}{{ i }}{% endfor %}{% endmacro %}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (QWEN2, "openai"),
        (QWEN3, "openai"),  # ``for item in content`` inside the render_content macro
        ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% endfor %}", "string"),
        ("{% set msgs = messages %}{% for m in msgs %}{% for c in m.content %}{{ c }}"
         "{% endfor %}{% endfor %}", "openai"),
        ("{% set ns = namespace(rest=messages[1:]) %}{% for m in ns.rest %}"
         "{% for c in m['content'] %}x{% endfor %}{% endfor %}", "openai"),
        ("{% for m in messages %}{% set content = m.content %}{% for c in content %}x"
         "{% endfor %}{% endfor %}", "openai"),
        (MACRO + "{% for m in messages %}{{ r(x=m.content) }}{% endfor %}", "openai"),
        (MACRO + "{% for m in messages %}{{ r(m.role) }}{% endfor %}", "string"),
        ("{% macro r(content) %}{% for i in content %}{{ i }}{% endfor %}{% endmacro %}"
         "{% for m in messages %}{{ r(m.role) }}{% endfor %}", "string"),
        ("{% for m in messages %}{% for c in m['content'] | selectattr('type', 'equalto', "
         "'text') %}{{ c.text }}{% endfor %}{% endfor %}", "openai"),
        ("{% for i, m in messages %}{{ m }}{% endfor %}", "string"),  # vLLM's assert fails
        ("{% set ns = namespace(x=none) %}{% set ns.x = messages %}{% for m in ns.x %}"
         "{% for c in m.content %}x{% endfor %}{% endfor %}", "openai"),
        ("{% set ok = messages is defined %}{% for m in messages %}{{ m.content }}{% endfor %}",
         "string"),
    ],
    ids=["qwen2-vl", "qwen3-vl-macro", "plain", "alias", "namespace", "content-variable",
         "macro-keyword", "macro-other-argument", "macro-param-named-content", "filtered",
         "tuple-target", "namespace-attribute", "tested-alias"],
)  # fmt: skip
def test_content_format_is_what_vllm_detects(source: str, expected: str) -> None:
    assert content_format(ENV.parse(source)) == expected


def test_developer_role_support_is_a_quoted_name_in_the_source() -> None:
    assert supports_developer("{% if m.role == 'developer' %}")
    assert supports_developer('{% if m.role == "developer" %}')
    assert not supports_developer(QWEN2)
    assert not supports_developer("developers welcome")


def test_template_variables_are_the_undeclared_ones() -> None:
    names = template_variables(ENV.parse(QWEN2))
    assert {"messages", "add_generation_prompt", "add_vision_id"} <= names
    assert "image_count" not in names  # set by the template itself
