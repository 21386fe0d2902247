"""Output normalisation: equivalent code, patches and text get one key (the votes compare keys)."""

from __future__ import annotations

from agentflow.swe.normalize import normalise_output


def test_python_outputs_equal_up_to_formatting_vote_together() -> None:
    a = "def f(x):\n    return x + 1  # add one\n"
    b = "def f(x): return (x+1)\n"
    c = "def f(x):\n    return x + 2\n"
    assert normalise_output(a) == normalise_output(b)
    assert normalise_output(a) != normalise_output(c)


def test_patches_compare_by_the_ast_of_added_code() -> None:
    p1 = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return x+1\n"
    p2 = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return (x + 1)  # fixed\n"
    p3 = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return x-1\n"
    p4 = p1.replace("m.py", "n.py")
    assert normalise_output(p1) == normalise_output(p2)
    assert normalise_output(p1) != normalise_output(p3)
    assert normalise_output(p1) != normalise_output(p4)


def test_changed_file_contents_win_over_the_output_and_text_falls_back_to_whitespace() -> None:
    assert normalise_output("x", {"a.py": "y = 1\n"}) == normalise_output("z", {"a.py": "y=1"})
    assert normalise_output("the  answer is \n\n  42 ") == normalise_output("the answer is\n42")
    assert normalise_output("the answer is 42") != normalise_output("the answer is 43")
