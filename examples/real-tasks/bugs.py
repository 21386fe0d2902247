'''The injected bugs: one single-site text edit per task, and the report a user could have written.

`old` must occur exactly once in `file`; `new` replaces it. `functions` are the gold patch's functions
(`path:function` or `path:Class.method`), for localization figures. The reports describe the call, what
happens and what was expected, never where the code is.
'''

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    task: str
    """Task folder name under repos/ (also the tail of the instance id)."""
    package: str
    file: str
    old: str
    new: str
    functions: tuple[str, ...]
    kind: str
    statement: str


BUGS = [
    # ---------------------------------------------------------------- tabulate
    Bug("tabulate-1", "tabulate", "tabulate/__init__.py",
        '        return ("-" * (w - 1)) + ":"\n    elif align == "center"',
        '        return ("-" * w) + ":"\n    elif align == "center"',
        ("tabulate/__init__.py:_pipe_segment_with_colons",), "off-by-one",
        """
Markdown ("pipe") tables: the separator under right-aligned/number columns is one dash too long

In `tablefmt="pipe"` the line under the header of a right-aligned column (every numeric column, by
default) has one dash too many, so it is wider than the column and the table no longer lines up:

```python
>>> from tabulate import tabulate
>>> print(tabulate([["spam", 41.9999], ["eggs", 451.0]], headers=["strings", "numbers"], tablefmt="pipe"))
| strings   |   numbers |
|:----------|-----------:|
| spam      |   41.9999 |
| eggs      |  451      |
```

The `-----------:` segment is 12 characters while the cells are 11 wide; left-aligned columns are fine.
Expected the separator to have exactly the column's width, ending in the colon, as in the README.
"""),
    Bug("tabulate-2", "tabulate", "tabulate/__init__.py",
        "                return len(string) - pos - 1",
        "                return len(string) - pos",
        ("tabulate/__init__.py:_afterpoint",), "off-by-one",
        """
Integers and floats in the same column are no longer aligned on the decimal point

With the default `numalign="decimal"`, a column mixing integers and floats is misaligned by one
character: the integer ends one column too far left, as if it had a decimal point at its end.

```python
>>> from tabulate import tabulate
>>> print(tabulate([["spam", 41.9999], ["eggs", 451.0]], headers=["strings", "numbers"]))
strings      numbers
---------  ---------
spam         41.9999
eggs       451
```

The README shows `451` with its last digit right above the `.` of `41.9999` (`eggs        451`), and
that is what I expect; the same misalignment appears in the grid/pipe/rst formats and for columns like
`["1", "2.5", "10.75"]`.
"""),
    Bug("tabulate-3", "tabulate", "tabulate/__init__.py",
        '        stralign = "center" if stralign == _DEFAULT_ALIGN else stralign\n    else:',
        '        stralign = "left" if stralign == _DEFAULT_ALIGN else stralign\n    else:',
        ("tabulate/__init__.py:tabulate",), "wrong default",
        """
`tablefmt="pretty"` no longer centers the cells

The `pretty` format is documented to look like PrettyTable's output, where every cell is centered. Now
the cells are flushed left:

```python
>>> from tabulate import tabulate
>>> print(tabulate([["spam", 41.9999], ["eggs", 451.0]], headers=["strings", "numbers"], tablefmt="pretty"))
+---------+---------+
| strings | numbers |
+---------+---------+
| spam    | 41.9999 |
| eggs    | 451.0   |
+---------+---------+
```

Expected `|  spam   |` and `|  451.0  |`, centered as before and as PrettyTable does, unless I pass
`stralign`/`numalign` explicitly.
"""),
    # ---------------------------------------------------------------- more-itertools
    Bug("more-itertools-1", "more-itertools", "more_itertools/more.py",
        "            if maxsplit == 1:\n                yield list(it)",
        "            if maxsplit == 0:\n                yield list(it)",
        ("more_itertools/more.py:split_at",), "off-by-one",
        """
`split_at(..., maxsplit=1)` splits twice

`maxsplit` is supposed to limit the number of splits, like `str.split`. With `maxsplit=1` I get one split
too many:

```python
>>> from more_itertools import split_at
>>> list(split_at('abcdcba', lambda x: x == 'b', maxsplit=1))
[['a'], ['c', 'd', 'c'], ['a']]
```

Expected `[['a'], ['c', 'd', 'c', 'b', 'a']]`: after one split the rest of the input should come back
unsplit. The same happens with `keep_separator=True`: `maxsplit=1` should give
`[['a'], ['b'], ['c', 'd', 'c', 'b', 'a']]`.
"""),
    Bug("more-itertools-2", "more-itertools", "more_itertools/more.py",
        "                yield islice(iterable_with_repeat, n - 1)",
        "                yield islice(iterable_with_repeat, n)",
        ("more_itertools/more.py:padded",), "off-by-one",
        """
`padded(..., next_multiple=True)` does not pad to a multiple of n

I use `padded` to fill a sequence up to a whole number of rows:

```python
>>> from more_itertools import padded
>>> list(padded([1, 2, 3, 4, 5], n=3, next_multiple=True))
[1, 2, 3, 4, 5, None, None, None]
```

That is 8 items, not a multiple of 3; I expected `[1, 2, 3, 4, 5, None]`. Inputs that already are a
multiple of n also grow (`padded([1, 2, 3, 4, 5, 6], n=6, next_multiple=True)` should be unchanged).
Without `next_multiple` the function behaves.
"""),
    # ---------------------------------------------------------------- toolz
    Bug("toolz-1", "toolz", "toolz/itertoolz.py",
        "    inposed = concat(zip(itertools.repeat(el), seq))\n    next(inposed)\n",
        "    inposed = concat(zip(itertools.repeat(el), seq))\n",
        ("toolz/itertoolz.py:interpose",), "missing edge case",
        """
`interpose` puts the separator in front of the first element as well

```python
>>> from toolz import interpose
>>> list(interpose("a", [1, 2, 3]))
['a', 1, 'a', 2, 'a', 3]
>>> ", ".join(interpose(", ", ["x", "y"]))   # building a string
```

Expected `[1, 'a', 2, 'a', 3]`: the element should only go *between* items (as the docstring shows),
never before the first one. An empty input should stay empty.
"""),
    Bug("toolz-2", "toolz", "toolz/itertoolz.py",
        "            yield prev[:len(seq) % n]",
        "            yield prev[:len(seq) % n - 1]",
        ("toolz/itertoolz.py:partition_all",), "off-by-one",
        """
`partition_all` drops an element of the last, short partition for lists

```python
>>> from toolz import partition_all
>>> list(partition_all(2, [1, 2, 3, 4, 5]))
[(1, 2), (3, 4), ()]
>>> list(partition_all(3, [1, 2, 3, 4, 5]))
[(1, 2, 3), (4,)]
```

The final partition should hold everything that is left: `(5,)` in the first case and `(4, 5)` in the
second. With a generator instead of a list the result is right, so data gets lost only for sequences
with a length.
"""),
    Bug("toolz-3", "toolz", "toolz/itertoolz.py",
        "        return tuple(collections.deque(seq, n))",
        "        return tuple(collections.deque(seq, n - 1))",
        ("toolz/itertoolz.py:tail",), "off-by-one",
        """
`tail` and `last` are wrong for iterators (one item short)

For lists they work, but for any iterable without slicing:

```python
>>> from toolz import tail, last
>>> tail(2, iter([10, 20, 30, 40, 50]))
(50,)
>>> last(iter('ABC'))
Traceback (most recent call last):
  ...
IndexError: tuple index out of range
```

Expected `(40, 50)` and `'C'`, the same as for `tail(2, [10, 20, 30, 40, 50])` and `last('ABC')`.
"""),
    Bug("toolz-4", "toolz", "toolz/itertoolz.py",
        "    return itertools.islice(seq, 0, None, n)",
        "    return itertools.islice(seq, 1, None, n)",
        ("toolz/itertoolz.py:take_nth",), "off-by-one",
        """
`take_nth` skips the first element

```python
>>> from toolz import take_nth
>>> list(take_nth(2, [10, 20, 30, 40, 50]))
[20, 40]
```

The docstring (and clojure's take-nth) say every nth item *starting with the first*: `[10, 30, 50]`.
With `n=1` I also lose the first item instead of getting the whole sequence back.
"""),
    # ---------------------------------------------------------------- semver
    Bug("semver-1", "semver", "src/semver/version.py",
        "            elif isinstance(a, int):\n                return -1",
        "            elif isinstance(a, int):\n                return 1",
        ("src/semver/version.py:Version._nat_cmp",), "wrong ordering",
        """
Numeric pre-release identifiers sort after alphanumeric ones

The SemVer spec (item 11) says numeric identifiers always have lower precedence than alphanumeric ones,
so `1.0.0-1 < 1.0.0-alpha`. semver gets this backwards:

```python
>>> import semver
>>> semver.compare("1.0.0-1", "1.0.0-alpha")
1
>>> semver.Version.parse("1.0.0-alpha.1") < semver.Version.parse("1.0.0-alpha.beta")
False
```

Expected `-1` and `True`. Sorting a list of release candidates with mixed identifiers therefore puts
them in the wrong order.
"""),
    Bug("semver-2", "semver", "src/semver/version.py",
        "            and (other.minor >= self.minor)",
        "            and (other.minor > self.minor)",
        ("src/semver/version.py:Version.is_compatible",), "wrong comparison",
        """
`Version.is_compatible` says a version is not compatible with the same minor release

```python
>>> from semver import Version
>>> Version(1, 1, 0).is_compatible(Version(1, 1, 5))
False
>>> Version(1, 1, 0).is_compatible(Version(1, 1, 0))
False
>>> Version(1, 1, 0).is_compatible(Version(1, 2, 0))
True
```

By the documented rule (same major > 0, other minor >= this minor, same pre-release; patches are not
checked) `1.1.0` is compatible with `1.1.5` and certainly with itself, so I expected `True` for the
first two. Only a newer minor is accepted now, which breaks my "is this install new enough" check.
"""),
    Bug("semver-3", "semver", "src/semver/version.py",
        '            prerelease = str(token) + ".0"',
        '            prerelease = str(token) + ".1"',
        ("src/semver/version.py:Version.bump_prerelease",), "wrong default",
        """
`bump_prerelease()` on a release skips `rc.1`

Bumping the pre-release of a version that has none should start the counter at 1:

```python
>>> import semver
>>> str(semver.Version.parse("3.4.5").bump_prerelease())
'3.4.5-rc.2'
>>> str(semver.Version.parse("3.4.5").bump_prerelease("dev"))
'3.4.5-dev.2'
```

Expected `3.4.5-rc.1` and `3.4.5-dev.1`. Bumping an existing pre-release (`3.4.5-rc.1` -> `rc.2`) still
works; `next_version("prerelease")` is affected as well.
"""),
    # ---------------------------------------------------------------- cachetools
    Bug("cachetools-1", "cachetools", "src/cachetools/__init__.py",
        "        if size > maxsize:\n",
        "        if size >= maxsize:\n",
        ("src/cachetools/__init__.py:Cache.__setitem__",), "wrong comparison",
        """
A value exactly as large as `maxsize` is rejected with "value too large"

With a size function, an item whose size equals the cache's `maxsize` should still fit (it evicts
everything else):

```python
>>> from cachetools import LRUCache
>>> c = LRUCache(maxsize=3, getsizeof=len)
>>> c['a'] = 'xyz'
Traceback (most recent call last):
  ...
ValueError: value too large
```

Same with `Cache`, `FIFOCache`, `LFUCache`, `TTLCache`. Expected the item to be stored (`currsize == 3`);
only values larger than `maxsize` should raise.
"""),
    Bug("cachetools-2", "cachetools", "src/cachetools/__init__.py",
        "            return self.timer() < link.expires\n",
        "            return self.timer() <= link.expires\n",
        ("src/cachetools/__init__.py:TTLCache.__contains__",), "wrong comparison",
        """
TTLCache: `key in cache` is True at the moment the item expires, but `cache[key]` raises KeyError

With a manual timer, an item inserted at t=0 with ttl=1 should be gone at t=1. Membership and lookup
disagree exactly at the expiry time:

```python
>>> from cachetools import TTLCache
>>> now = [0]
>>> c = TTLCache(maxsize=2, ttl=1, timer=lambda: now[0])
>>> c[1] = 'one'
>>> now[0] = 1
>>> 1 in c
True
>>> c[1]
KeyError: 1
```

Expected `1 in c` to be False once the ttl has elapsed, consistent with `__getitem__`, `len()` and
`expire()`.
"""),
    Bug("cachetools-3", "cachetools", "src/cachetools/__init__.py",
        "        if key in self:  # __missing__ may not store item\n            self.__counter[key] -= 1",
        "        if key in self:  # __missing__ may not store item\n            self.__counter[key] += 1",
        ("src/cachetools/__init__.py:LFUCache.__getitem__",), "wrong update",
        """
LFUCache evicts the most frequently read item instead of the least frequently used one

```python
>>> from cachetools import LFUCache
>>> c = LFUCache(maxsize=2)
>>> c[1] = 1
>>> c[2] = 2
>>> for _ in range(3): c[1]      # 1 is hot
>>> c[3] = 3
>>> sorted(c)
[2, 3]
```

The key I read three times was evicted and the one never read survived. Expected `[1, 3]`: reads must
count as uses, so the least frequently used entry (2) goes first.
"""),
    # ---------------------------------------------------------------- parse
    Bug("parse-1", "parse", "parse.py",
        '            if sign == "-":\n                offset = -offset',
        '            if sign == "+":\n                offset = -offset',
        ("parse.py:date_convert",), "wrong sign",
        """
Parsed timezone offsets have the wrong sign

Parsing an ISO 8601 timestamp with a timezone gives the opposite offset:

```python
>>> import parse
>>> r = parse.parse("{:ti}", "1997-07-16T19:20:30+01:00")
>>> r[0].utcoffset()
datetime.timedelta(days=-1, seconds=82800)
```

Expected `timedelta(seconds=3600)` (UTC+1); negative offsets such as `-05:00` come out as +5 hours. It
affects every format with a timezone (`ti`, `te`, `tg`, `ta`...). Times in UTC (`Z`) are fine.
"""),
    Bug("parse-2", "parse", "parse.py",
        "                    k = subkey[1:-1]",
        "                    k = subkey[1:]",
        ("parse.py:Parser._expand_named_fields",), "off-by-one",
        """
Bracketed field names produce keys with a trailing `]`

parse lets me group named fields with brackets, e.g. `{person[name]}`, and returns nested dicts. The
inner keys come back with the closing bracket:

```python
>>> import parse
>>> parse.parse("{hello[world]}_{hello[foo][baz]}", "a_b").named
{'hello': {'world]': 'a', 'foo]': {'baz]': 'b'}}}
```

Expected `{'hello': {'world': 'a', 'foo': {'baz': 'b'}}}`, i.e. `r['hello']['world']` should work.
"""),
    Bug("parse-3", "parse", "parse.py",
        '        elif string[0] == "+":\n            sign = 1\n            number_start = 1',
        '        elif string[0] == "+":\n            sign = 1\n            number_start = 0',
        ("parse.py:int_convert.__call__",), "missing edge case",
        """
`{:d}` mis-parses numbers with an explicit `+` sign and a base prefix

```python
>>> import parse
>>> parse.parse("{:d}", "-0x1A")[0]
-26
>>> parse.parse("{:d}", "+0x1A")[0]
1
>>> parse.parse("{:d}", "+0b101")[0]
101
```

The `+` form should work like the `-` form: `+0x1A` is 26, `+0b101` is 5, `+0o17` is 15 (I get 1, 101
and 17: the base prefix is ignored and the digits are read as decimal). Plain `+12` also has to keep parsing as 12.
"""),
    # ---------------------------------------------------------------- inflection
    Bug("inflection-1", "inflection", "inflection/__init__.py",
        "    number = abs(int(number))\n",
        "    number = int(number)\n",
        ("inflection/__init__.py:ordinal",), "missing edge case",
        """
`ordinalize` gives wrong suffixes for negative numbers

```python
>>> import inflection
>>> inflection.ordinalize(-1)
'-1th'
>>> inflection.ordinalize(-1021)
'-1021th'
>>> inflection.ordinal(-2)
'th'
```

Expected `-1st`, `-1021st` and `nd`: the suffix should depend on the digits only, like for positive
numbers (`ordinalize(1021)` is `1021st`). `-11`, `-12`, `-13` should stay `th`.
"""),
    Bug("inflection-2", "inflection", "inflection/__init__.py",
        '''    word = re.sub(r"([a-z\\d])([A-Z])", r'\\1_\\2', word)''',
        '''    word = re.sub(r"([a-z])([A-Z])", r'\\1_\\2', word)''',
        ("inflection/__init__.py:underscore",), "missing edge case",
        """
`underscore()` does not split after a digit

```python
>>> import inflection
>>> inflection.underscore("Area51Controller")
'area51controller'
>>> inflection.tableize("Area51Controller")
'area51controllers'
```

Expected `area51_controller` (and `area51_controllers`): an upper-case letter that follows a digit starts
a new word, as it does after a lower-case letter. `camelize("area51_controller")` round-trips to
`Area51Controller`, so `underscore` should be its inverse here.
"""),
    # ---------------------------------------------------------------- six
    Bug("six-1", "six", "six.py",
        "            if isinstance(slots, str):\n                slots = [slots]",
        "            if isinstance(slots, bytes):\n                slots = [slots]",
        ("six.py:add_metaclass",), "wrong type check",
        """
`@six.add_metaclass` fails on a class whose `__slots__` is a single string

A class may declare one slot as a plain string (`__slots__ = "ab"`). Decorating such a class breaks:

```python
>>> import six
>>> class Meta(type): pass
>>> @six.add_metaclass(Meta)
... class Point:
...     __slots__ = "ab"
Traceback (most recent call last):
  ...
KeyError: 'a'
```

Expected the class to be created with metaclass `Meta` and `__slots__ == "ab"`, as it is for
`__slots__ = ["a", "b"]` or without the decorator.
"""),
    Bug("six-2", "six", "six.py",
        "            if value.__traceback__ is not tb:",
        "            if value.__traceback__ is tb:",
        ("six.py:reraise",), "inverted condition",
        """
`six.reraise(tp, None, tb)` loses the traceback it is given

I keep `sys.exc_info()` of an error and re-raise it later, sometimes letting six build the exception from
its type:

```python
import sys, six
try:
    raise ValueError("boom")
except ValueError:
    tp, val, tb = sys.exc_info()
...
try:
    six.reraise(tp, None, tb)
except ValueError:
    tb2 = sys.exc_info()[2]
```

`tb2` holds only the frames of the `reraise` call: the frames of the original error (`tb`) are not attached.
The same happens with `six.reraise(tp, ValueError("other"), tb)`. Only when the value still carries
`tb` itself does it come through. Expected the given traceback to be attached in every case, as the
three-argument `raise` of Python 2 did, which `six.reraise` stands in for.
"""),
    Bug("six-3", "six", "six.py",
        '            raise AttributeError("no such move, %r" % (name,))',
        '            raise KeyError("no such move, %r" % (name,))',
        ("six.py:remove_move",), "wrong exception",
        """
`six.remove_move` raises KeyError for an unknown name

```python
>>> import six
>>> six.remove_move("eggs")
Traceback (most recent call last):
  ...
KeyError: "no such move, 'eggs'"
```

Removing a move that does not exist should raise `AttributeError`, like `delattr` on a missing
attribute (moves are attributes of `six.moves`), and my code catches `AttributeError` around it.
Expected `AttributeError: no such move, 'eggs'`.
"""),
]
