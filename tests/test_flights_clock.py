"""Where the schedule's clock goes while programs' starts are in the air (chaos.deterministic.flights).

A flight's clock is how far its own grants got, and how far they got at any one moment is a matter of
real time. When nothing in the schedule can run before some instant, the clock may move only to a
flight's landing, never to where a flight in the air happens to be: one Wowbagger run in three (4
workers, 10 s, seed 1, with other runs beside it) had another trace so, the clock of one grant set by
how far a Node start had got. Here the flights are scripted, each a list of the clocks of its grants
and where it lands, and the moment the schedule looks at them, and the order they move in, vary as
real time would make them: the outcome must not."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from chaos.deterministic.flights import Flight, Flights


class Schedule(Flights):
    """The Flights mixin alone: pumping moves one flight a grant, by a script of which goes next (a flight
    not landed always has a grant left: its last one lands it)."""

    def __init__(self, flights: dict, progress: dict, order):
        self.vt = 1
        self.scripts = flights
        self.flights = []
        for name, done in progress.items():   # each flight as far as real time got it before the look
            f = Flight(SimpleNamespace(name=name), 0, 0)
            self.flights.append(f)
            for _ in range(done):
                self._grant(f)
        self.order = itertools.cycle(order)
        self.joined = []

    def _grant(self, f: Flight) -> None:
        grants = self.scripts[f.proc.name]
        f.vt = grants[f.grants]
        f.grants += 1
        f.landed = f.grants == len(grants)   # its last grant's stop is where it lands

    def _pump_flights(self, waiting_for: list) -> None:
        for name in self.order:
            f = next((f for f in self.flights if f.proc.name == name and not f.landed), None)
            if f is not None:
                self._grant(f)
                if f in waiting_for:
                    return

    def _join(self, f: Flight) -> None:
        self.flights.remove(f)
        self.joined.append((f.proc.name, self.vt))


# the clocks of each flight's grants, the last where it lands: a at 6 ms, b at 11, c at 36 (later than any look)
FLIGHTS = {"a": [2, 4, 6], "b": [3, 5, 7, 9, 11], "c": [2, 8, 14, 20, 26, 30, 36]}


def _look(until, progress, order):
    s = Schedule(FLIGHTS, progress, order)
    moved = s._flights_first(until)
    return moved, s.vt, s.joined


@pytest.mark.parametrize("until", [5, 6, 10, 40, None])
def test_the_clock_moves_to_a_landing_never_to_where_a_flight_in_the_air_is(until):
    outcomes = set()
    for done_a, done_b, done_c in itertools.product(range(4), range(6), range(3)):
        for order in itertools.permutations("abc"):
            moved, vt, joined = _look(until, {"a": done_a, "b": done_b, "c": done_c}, order)
            outcomes.add((moved, vt, tuple(joined)))
    assert len(outcomes) == 1, sorted(outcomes)
    moved, vt, joined = outcomes.pop()
    if until is not None and until < 6:
        # nothing lands by then: the clock is the caller's to move (a wake, its deadline), not a flight's
        assert (moved, vt, joined) == (False, 1, ())
    else:
        # the first landing, and the flight that landed there joins at it; b and c are still out
        assert (moved, vt, joined) == (True, 6, (("a", 6),))
