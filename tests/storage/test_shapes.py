"""Statements built per shape are kept in a bounded table: a process that meets new shapes for hours
keeps at most `size` of them, the most recently used."""

from storage.shapes import Shapes


def test_the_least_recently_used_shape_goes_first_and_is_built_again_when_it_returns() -> None:
    built: list[int] = []

    def build(n: int) -> str:
        built.append(n)
        return f"SQL {n}"

    shapes: Shapes[int, str] = Shapes(size=3)
    for n in (1, 2, 3):
        assert shapes.get(n, lambda n=n: build(n)) == f"SQL {n}"
    assert shapes.get(1, lambda: build(1)) == "SQL 1"  # kept: not built again, and now the most recent
    shapes.get(4, lambda: build(4))  # over the bound: 2, the least recently used, goes
    assert len(shapes) == 3
    shapes.get(1, lambda: build(1))
    shapes.get(2, lambda: build(2))
    assert built == [1, 2, 3, 4, 2]


def test_a_long_run_of_new_shapes_stays_within_the_bound() -> None:
    shapes: Shapes[int, str] = Shapes(size=256)
    for n in range(10_000):
        shapes.get(n, lambda n=n: str(n))
    assert len(shapes) == 256
