"""The TravelPlanner reference database ("sandbox"), read lazily, with the official look-up semantics.

Layout: the `database/` folder of the official zip (linked from the README of
github.com/OSU-NLP-Group/TravelPlanner), one CSV per tool with the official column names:

    flights/clean_Flights_2022.csv              Flight Number, Price, DepTime, ArrTime, ActualElapsedTime,
                                                FlightDate, OriginCityName, DestCityName, Distance
    accommodations/clean_accommodations_2022.csv  NAME, room type, price, minimum nights, review rate number,
                                                house_rules, maximum occupancy, city
    restaurants/clean_restaurant_2022.csv       Name, City, Cuisines, Average Cost, Aggregate Rating
    attractions/attractions.csv                 Name, Latitude, Longitude, Address, Phone, Website, City
    googleDistanceMatrix/distance.csv           origin, destination, cost, duration, distance
    background/citySet_with_states.txt          one `city<TAB>state` per line

Extra columns (the unnamed pandas index most files carry) are ignored. Semantics follow the official
loaders `tools/*/apis.py` as `evaluation/commonsense_constraint.py` and `evaluation/hard_constraint.py`
use them:

- flights, accommodations, restaurants and attractions are read with pandas `read_csv(...).dropna()`:
  a row with any missing field (empty, or one of pandas' default NA strings such as "NA", "None",
  "nan") is not in the sandbox. The distance table is read without `dropna`.
- restaurants, accommodations and attractions are matched by "the database name *contains* the
  plan's name" (case-sensitive substring) and "the city is equal"; values are taken from the first
  match in file order. The minimum-nights rule is only applied when exactly one row matches.
- a flight is in the sandbox when a row has that number, origin and destination; its price is the
  first row with that number (origin and destination are not looked at for the cost).
- self-driving and taxi: the first row for (origin, destination), after cutting each city at a "(";
  no cost (= not in the sandbox) when duration or distance is missing or the duration mentions "day";
  self-driving costs int(km * 0.05), a taxi int(km), per vehicle.

Each table is read with polars (every field as text, null strings as pandas has them) the first time a
check needs it; the flight table is kept sorted by number and searched by bisection.

The flights table is optional: the official repository never committed it (its README links a zip with it). Without
it, a query is checked against its own flight rows, those of its reference information (`QueryDatabase`): a flight
is then in the sandbox when the query's reference information lists it (number, origin, destination), where the
full table would also admit a real flight of another day or route the query was never shown. The price is the
listed row's either way: a flight number is one row of the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError, elide

FILES = {
    "flights": "flights/clean_Flights_2022.csv",
    "accommodations": "accommodations/clean_accommodations_2022.csv",
    "restaurants": "restaurants/clean_restaurant_2022.csv",
    "attractions": "attractions/attractions.csv",
    "distance": "googleDistanceMatrix/distance.csv",
    "cities": "background/citySet_with_states.txt",
}

COLUMNS = {
    "flights": ["Flight Number", "Price", "OriginCityName", "DestCityName"],
    "accommodations": ["NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy", "city"],
    "restaurants": ["Name", "City", "Cuisines", "Average Cost"],
    "attractions": ["Name", "City"],
    "distance": ["origin", "destination", "duration", "distance"],
}

# pandas' default `na_values` (pandas 2.x, the version the official requirements pin: 2.0.1).
PANDAS_NA = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
             "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]

_PAREN = re.compile(r"^(.*?)\([^)]*\)")


def before_parenthesis(text: str) -> str:
    """`Rockford(Illinois)` -> `Rockford` (official `extract_before_parenthesis`; no strip)."""
    m = _PAREN.search(text)
    return m.group(1) if m else text


def find_database(folder: Path) -> Path | None:
    """The folder holding the official tables: `folder` itself or `folder/database`."""
    for cand in (folder, folder / "database"):
        if (cand / FILES["restaurants"]).is_file() or (cand / FILES["flights"]).is_file():
            return cand
    return None


@dataclass(frozen=True)
class Accommodation:
    name: str
    price: str
    room_type: str
    house_rules: str
    minimum_nights: str
    maximum_occupancy: str


@dataclass(frozen=True)
class Restaurant:
    name: str
    cuisines: str
    average_cost: str


class DatabaseError(InputError):
    """A database field the checks need is damaged: an input error (exit 2) naming the file, never scored as the
    model's fault. It is not a ValueError, so the checks' net for malformed plans does not catch it."""


def number(text: str, what: str, table: str) -> float:
    """A numeric field of the database's `table` (pandas would have parsed it as a number); DatabaseError names
    the file when it is not one."""
    try:
        return float(text)
    except (TypeError, ValueError):
        raise DatabaseError(f"TravelPlanner database file {FILES[table]}: the {what} field {elide(repr(text), 80)} "
                            f"is not a number; expected the official table, where it is numeric. Replace the "
                            f"database with the official files.") from None


class Database:
    """One database folder. Tables are read on first use and kept."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._flights = None
        self._acc: dict[str, list[Accommodation]] | None = None
        self._rest: dict[str, list[Restaurant]] | None = None
        self._attr: dict[str, list[str]] | None = None
        self._dist: dict[tuple[str, str], tuple[str | None, str | None]] | None = None
        self._cities: dict[str, str] | None = None

    # ------------------------------------------------------------------ files
    def paths(self) -> list[Path]:
        """The tables' files (the flights table only where it is there)."""
        return [self.root / rel for key, rel in FILES.items() if key != "flights" or self.has_flight_table()]

    def missing(self) -> list[str]:
        """The tables absent from the folder; the flights table is optional (see `QueryDatabase`)."""
        return [rel for key, rel in FILES.items() if key != "flights" and not (self.root / rel).is_file()]

    def has_flight_table(self) -> bool:
        return (self.root / FILES["flights"]).is_file()

    def _read(self, key: str, dropna: bool, sort: str | None = None):
        """The table's needed columns (every field as text), read lazily with polars."""
        import polars as pl

        path = self.root / FILES[key]
        try:
            lf = pl.scan_csv(path, infer_schema=False, null_values=PANDAS_NA, encoding="utf8-lossy")
            header = lf.collect_schema().names()
            absent = [c for c in COLUMNS[key] if c not in header]
            if absent:
                raise InputError(f"TravelPlanner database file {path} lacks the column(s) {', '.join(absent)} "
                                 f"(header: {elide(', '.join(header), 200)}). Expected the official column names "
                                 f"{', '.join(COLUMNS[key])}.")
            if dropna:
                lf = lf.drop_nulls()  # pandas .dropna(): a missing field in any column drops the row
            lf = lf.select(COLUMNS[key])
            if sort:
                lf = lf.sort(sort, maintain_order=True)
            return lf.collect()
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise InputError(f"TravelPlanner database file {path} cannot be read as CSV ({exc}). Expected the "
                             f"official layout with the columns {', '.join(COLUMNS[key])}.") from None

    # ------------------------------------------------------------------ cities
    @property
    def cities(self) -> dict[str, str]:
        """city -> state, from background/citySet_with_states.txt."""
        if self._cities is None:
            path = self.root / FILES["cities"]
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"TravelPlanner city list {path} cannot be read ({exc}).") from None
            cities: dict[str, str] = {}
            for n, line in enumerate(text.split("\n"), 1):
                if not line.strip():
                    continue
                parts = line.rstrip("\r").split("\t")
                if len(parts) != 2:
                    raise InputError(f"{path}, line {n}: expected 'city<TAB>state', got {line[:80]!r}.")
                cities[parts[0]] = parts[1]
            self._cities = cities
        return self._cities

    # ------------------------------------------------------------------ flights
    def flight_table(self):
        if self._flights is None:
            if not self.has_flight_table():
                raise InputError(f"the TravelPlanner database at {self.root} has no flights table "
                                 f"({FILES['flights']}) and the query carries no flight rows: give the split's "
                                 f"reference information (train_ref_info.jsonl, as the official repository has it) "
                                 f"beside the split file, or add the official flights table.")
            # stable sort: rows sharing a number keep their file order ("first row" stays first)
            self._flights = self._read("flights", dropna=True, sort="Flight Number")
        return self._flights

    def flights(self, number: str) -> list[tuple[str, str, str]]:
        """(origin, destination, price) of every row with this flight number, in file order."""
        df = self.flight_table()
        col = df["Flight Number"]
        lo = int(col.search_sorted(number, side="left"))
        hi = int(col.search_sorted(number, side="right"))
        if hi <= lo:
            return []
        part = df.slice(lo, hi - lo)
        return list(zip(part["OriginCityName"], part["DestCityName"], part["Price"], strict=True))

    def flight_in_sandbox(self, number: str, origin: str, dest: str) -> bool:
        return any(o == origin and d == dest for o, d, _ in self.flights(number))

    def flight_price(self, number: str) -> float | None:
        rows = self.flights(number)
        return number_or_none(rows[0][2], "Price", "flights") if rows else None

    # ------------------------------------------------------------------ accommodations
    def accommodation_table(self) -> dict[str, list[Accommodation]]:
        if self._acc is None:
            df = self._read("accommodations", dropna=True)
            table: dict[str, list[Accommodation]] = {}
            for name, price, rtype, rules, mn, occ, city in df.iter_rows():
                table.setdefault(city, []).append(Accommodation(name, price, rtype, rules, mn, occ))
            self._acc = table
        return self._acc

    def accommodations(self, name: str, city: str) -> list[Accommodation]:
        """Rows whose NAME contains `name` and whose city is `city`, in file order."""
        return [a for a in self.accommodation_table().get(city, []) if name in a.name]

    # ------------------------------------------------------------------ restaurants
    def restaurant_table(self) -> dict[str, list[Restaurant]]:
        if self._rest is None:
            df = self._read("restaurants", dropna=True)
            table: dict[str, list[Restaurant]] = {}
            for name, city, cuisines, cost in df.iter_rows():
                table.setdefault(city, []).append(Restaurant(name, cuisines, cost))
            self._rest = table
        return self._rest

    def restaurant(self, name: str, city: str) -> Restaurant | None:
        """The first row whose Name contains `name` and whose City is `city`."""
        for r in self.restaurant_table().get(city, []):
            if name in r.name:
                return r
        return None

    # ------------------------------------------------------------------ attractions
    def attraction_table(self) -> dict[str, list[str]]:
        if self._attr is None:
            df = self._read("attractions", dropna=True)
            table: dict[str, list[str]] = {}
            for name, city in df.iter_rows():
                table.setdefault(city, []).append(name)
            self._attr = table
        return self._attr

    def attraction_in_sandbox(self, name: str, city: str) -> bool:
        return any(name in n for n in self.attraction_table().get(city, []))

    # ------------------------------------------------------------------ distances
    def distance_table(self) -> dict[tuple[str, str], tuple[str | None, str | None]]:
        if self._dist is None:
            df = self._read("distance", dropna=False)
            table: dict[tuple[str, str], tuple[str | None, str | None]] = {}
            for origin, dest, duration, distance in df.iter_rows():
                table.setdefault((origin, dest), (duration, distance))  # the first row counts
            self._dist = table
        return self._dist

    def distance_cost(self, origin: str, dest: str, mode: str) -> int | None:
        """Cost of one vehicle, or None when the route has no valid information (official
        `GoogleDistanceMatrix.run_for_evaluation`)."""
        origin, dest = before_parenthesis(origin), before_parenthesis(dest)
        row = self.distance_table().get((origin, dest))
        if row is None:
            return None
        duration, distance = row
        if duration is None or distance is None or "day" in duration:
            return None
        km = number(distance.replace("km", "").replace(",", ""), "distance", "distance")
        if "driving" in mode:
            return int(km * 0.05)
        if mode == "taxi":
            return int(km)
        return None


def number_or_none(text: str | None, what: str, table: str) -> float | None:
    return None if text is None else number(text, what, table)


class QueryDatabase(Database):
    """The tables of a shared `Database` (read once, by it) with one query's flight rows in place of the flights
    table: rows with the official column names, as a query's reference information lists them."""

    def __init__(self, base: Database, flights: list[dict[str, Any]]):
        import polars as pl

        super().__init__(base.root)
        self.base = base
        cols = COLUMNS["flights"]
        rows = [r for r in flights if all(r.get(c) not in (None, *PANDAS_NA) for c in cols)]  # pandas' dropna
        frame = pl.DataFrame({c: [str(r[c]) for r in rows] for c in cols}, schema={c: pl.String for c in cols})
        self._flights = frame.sort("Flight Number", maintain_order=True)

    def has_flight_table(self) -> bool:
        return True

    @property
    def cities(self) -> dict[str, str]:
        return self.base.cities

    def accommodation_table(self) -> dict[str, list[Accommodation]]:
        return self.base.accommodation_table()

    def restaurant_table(self) -> dict[str, list[Restaurant]]:
        return self.base.restaurant_table()

    def attraction_table(self) -> dict[str, list[str]]:
        return self.base.attraction_table()

    def distance_table(self) -> dict[tuple[str, str], tuple[str | None, str | None]]:
        return self.base.distance_table()
