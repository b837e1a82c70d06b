"""SmolLM2's chat template (`tokenizer.chat_template` of the GGUF in argv[1]) rendered by Python
jinja2 the way Hugging Face transformers renders chat templates (sandboxed environment,
trim_blocks and lstrip_blocks, bos_token/eos_token from the vocab), for rayo-llm's chat test.
Prints the cases in the line format documented in the output's header."""
import sys

import jinja2
from gguf import GGUFReader
from jinja2.sandbox import ImmutableSandboxedEnvironment

r = GGUFReader(sys.argv[1])


def field(key):
    f = r.fields[key]
    return f.contents()


template = field("tokenizer.chat_template")
tokens = field("tokenizer.ggml.tokens")
bos = tokens[field("tokenizer.ggml.bos_token_id")]
eos = tokens[field("tokenizer.ggml.eos_token_id")]


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.globals["raise_exception"] = raise_exception
t = env.from_string(template)


def esc(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


cases = [
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

print(f"# SmolLM2-135M-Instruct chat template rendered by Python jinja2 {jinja2.__version__} as Hugging Face")
print("# transformers does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks), made by")
print("# scripts/ref/llm-refs.sh (scripts/ref/chat-ref.py). bos_token/eos_token = ids "
      f"{field('tokenizer.ggml.bos_token_id')}/{field('tokenizer.ggml.eos_token_id')} of the vocab.")
print("# Per case: `case NAME ADD_GENERATION_PROMPT(0|1)`, one `message ROLE CONTENT` line per message,")
print("# then `expect RENDERED`. CONTENT and RENDERED escaped: \\\\ \\n \\r \\t.")
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
