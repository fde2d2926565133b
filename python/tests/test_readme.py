"""The quick-start of python/README.md, and its copy in the main README, runs as written (its GPU
part only where there is one)."""
import os
import re

import pytest

HERE = os.path.dirname(__file__)
READMES = [os.path.join(HERE, "..", "README.md"), os.path.join(HERE, "..", "..", "README.md")]


@pytest.mark.parametrize("README", READMES, ids=["python/README.md", "README.md"])
def test_readme_example_runs(capsys, README):
    text = open(README).read()
    block = re.search(r"<!-- python-example:begin -->\s*```python\n(.*?)```\s*<!-- python-example:end -->",
                      text, re.S)
    assert block, f"{README} has no python-example block"
    exec(compile(block.group(1), "python/README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "swiglu(alpha=0x1.b3b646p+0,beta=0x1p+0,limit=0x1.cp+2)"
    assert out[1] == "True"
    assert out[2].startswith("backend=") and "w1_layout=interleaved" in out[2]
