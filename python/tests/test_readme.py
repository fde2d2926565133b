"""The quick-start of python/README.md runs as written (its GPU part only where there is one)."""
import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_readme_example_runs(capsys):
    text = open(README).read()
    block = re.search(r"<!-- python-example:begin -->\s*```python\n(.*?)```\s*<!-- python-example:end -->",
                      text, re.S)
    assert block, "python/README.md has no python-example block"
    exec(compile(block.group(1), "python/README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "swiglu(alpha=0x1.b3b646p+0,beta=0x1p+0,limit=0x1.cp+2)"
    assert out[1] == "True"
    assert out[2].startswith("backend=") and "w1_layout=interleaved" in out[2]
