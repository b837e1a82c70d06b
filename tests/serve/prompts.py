"""The prompts the server tests and `bench/serve_equal.py` send (greedy text compared with
`rayo generate` alone)."""

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "The three most useful things to know about Rust are",
    "def fibonacci(n):",
    "My favourite colour is blue because",
    "To make a cup of tea, first",
    "The sun rises in the east and",
    "In 1969, the first person to walk on the moon",
    "A haiku about the sea:",
    "The best way to learn a language is",
    "Water boils at",
    "Dear diary, today I",
    "The recipe calls for two eggs,",
    "Photosynthesis is the process by which",
    "Here is a list of prime numbers: 2, 3, 5,",
    "The quick brown fox",
]
