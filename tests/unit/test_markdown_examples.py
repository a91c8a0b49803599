"""The README examples' parser (tests/support/markdown_examples.py): blocks and commands as a reader copies them."""
from __future__ import annotations

from tests.support.markdown_examples import blocks, commands, substitute
from tests.support.jobs import REPO

DOC = '''# t
```bash
make demo   # a comment
# a whole comment line
pylog broker --data-dir /tmp/x \\
    --set a=1   # note after a continuation
echo 'a # not a comment'
```

```
a diagram, no language: not an example
```

```python
print("hi")
```
'''


def test_blocks_keep_their_language_order_and_line():
    found = blocks(DOC)
    assert [(b.lang, b.line) for b in found] == [("bash", 2), ("python", 14)]
    assert found[1].code == 'print("hi")\n'


def test_commands_drop_comments_and_join_continuations():
    assert commands(blocks(DOC)[0].code) == ["make demo", "pylog broker --data-dir /tmp/x --set a=1",
                                             "echo 'a # not a comment'"]


def test_substitutions_replace_the_longest_match_first():
    assert substitute("a localhost:9092 b --port 9092", {"localhost:9092": "127.0.0.1:5", "--port 9092": "--port 6"}) \
        == "a 127.0.0.1:5 b --port 6"


def test_the_readme_has_examples_of_both_kinds():
    found = blocks((REPO / "README.md").read_text())
    assert {b.lang for b in found} == {"bash", "python"}
