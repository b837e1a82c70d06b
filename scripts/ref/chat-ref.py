"""Chat templates rendered by Python jinja2 the way Hugging Face transformers renders them
(sandboxed environment, trim_blocks and lstrip_blocks, raise_exception), for rayo-llm's chat
test: SmolLM2's `tokenizer.chat_template` (from the GGUF in argv[1], bos_token/eos_token from its
vocab) and a small template of our own that exercises whitespace control and Python string
methods (.strip(), .startswith()) as Qwen-style templates use them. Prints the line format
documented in the output's header."""
import sys

import jinja2
from gguf import GGUFReader
from jinja2.sandbox import ImmutableSandboxedEnvironment

r = GGUFReader(sys.argv[1])


def field(key):
    return r.fields[key].contents()


tokens = field("tokenizer.ggml.tokens")
bos_id, eos_id = field("tokenizer.ggml.bos_token_id"), field("tokenizer.ggml.eos_token_id")


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.globals["raise_exception"] = raise_exception


def esc(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


# Whitespace control, trim/lstrip_blocks, .strip()/.startswith(), namespace, loop.last, bos/eos.
OWN = """{{ bos_token }}
{%- set ns = namespace(sys=false) %}
{% for m in messages %}
    {% if m['role'] not in ['system', 'user', 'assistant'] %}
        {{ raise_exception('bad role ' + m['role']) }}
    {% endif %}
    {% if m['role'] == 'system' %}{% set ns.sys = true %}{% endif %}
<{{ m['role'] }}>
{{ m['content'].strip() }}
    {%- if m['content'].startswith('!') %} [bang]{% endif %}
{% if not loop.last %}
---
{% endif %}
{% endfor %}
{% if add_generation_prompt %}
<assistant>{% if not ns.sys %} (no system){% endif %}
{% else %}{{ eos_token }}{% endif %}
"""

SMOL_CASES = [
    ("user-only", True, [("user", "What is the tallest mountain in the world?")]),
    ("user-only-no-prompt", False, [("user", "Hi!")]),
    ("with-system", True, [("system", "You are a terse assistant."), ("user", "Name three primes.")]),
    (
        "multi-turn",
        True,
        [
            ("user", "Write a haiku about rust."),
            ("assistant", "Iron slowly blooms\norange on the garden gate\ntime's quiet fire"),
            ("user", "Now one about  spaces\tand tabs, naïve café 🙂"),
        ],
    ),
    ("empty-content", False, [("system", ""), ("user", "")]),
]
OWN_CASES = [
    ("own-gen", True, [("user", "  padded question?  \n"), ("assistant", "!answer"), ("user", "again")]),
    ("own-system", False, [("system", "Be brief."), ("user", "x")]),
]

print(f"# Chat templates rendered by Python jinja2 {jinja2.__version__} as Hugging Face transformers does")
print("# (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, raise_exception), made by")
print("# scripts/ref/llm-refs.sh (scripts/ref/chat-ref.py).")
print("# `template NAME SOURCE`, `bos_token S`, `eos_token S` start a template; each following")
print("# `case NAME ADD_GENERATION_PROMPT(0|1)` has one `message ROLE CONTENT` line per message and then")
print("# `expect RENDERED`. Everything after the keyword (and NAME/ROLE) and one space is escaped:")
print("# \\\\ \\n \\r \\t. `smollm2` is SmolLM2-135M-Instruct's tokenizer.chat_template with its vocab's")
print(f"# tokens {bos_id}/{eos_id} as bos_token/eos_token.")
for tname, source, bos, eos, cases in [
    ("smollm2", field("tokenizer.chat_template"), tokens[bos_id], tokens[eos_id], SMOL_CASES),
    ("own", OWN, "<s>", "</s>", OWN_CASES),
]:
    t = env.from_string(source)
    print(f"template {tname} {esc(source)}")
    print(f"bos_token {esc(bos)}")
    print(f"eos_token {esc(eos)}")
    for name, gen, msgs in cases:
        out = t.render(
            messages=[{"role": a, "content": c} for a, c in msgs],
            add_generation_prompt=gen,
            bos_token=bos,
            eos_token=eos,
        )
        print(f"case {name} {int(gen)}")
        for a, c in msgs:
            print(f"message {a} {esc(c)}")
        print(f"expect {esc(out)}")
