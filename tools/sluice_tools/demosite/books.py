"""Deterministic generation of the book records (titles, prices per version, stock, text)."""

from __future__ import annotations

import random
import re
import unicodedata
from dataclasses import dataclass, replace

RATINGS = ("One", "Two", "Three", "Four", "Five")

# fmt: off
CATEGORIES = (
    "Travel", "Mystery", "Historical Fiction", "Sequential Art", "Classics", "Philosophy", "Romance",
    "Womens Fiction", "Fiction", "Childrens", "Religion", "Nonfiction", "Music", "Default", "Science Fiction",
    "Sports and Games", "Add a comment", "Fantasy", "New Adult", "Young Adult", "Science", "Poetry",
    "Paranormal", "Art", "Psychology", "Autobiography", "Parenting", "Adult Fiction", "Humor", "Horror",
    "History", "Food and Drink", "Christian Fiction", "Business", "Biography", "Thriller", "Contemporary",
    "Spirituality", "Academic", "Self Help", "Historical", "Christian", "Suspense", "Short Stories", "Novels",
    "Health", "Politics", "Cultural", "Erotica", "Crime",
)
_ADJECTIVES = (
    "Silent", "Crimson", "Hidden", "Last", "Forgotten", "Golden", "Broken", "Wild", "Secret",
    "Quiet", "Burning", "Northern", "Little", "Midnight", "Paper", "Glass", "Winter", "Lost",
)
_NOUNS = (
    "Garden", "River", "Attic", "Empire", "Lighthouse", "Orchard", "Library", "Harbor", "Crown",
    "Kingdom", "Journey", "Promise", "Machine", "Mountain", "Letters", "Station", "Voyage", "City",
)
# Titles exercising encoding: non-ASCII letters, typographic quotes and characters needing entities.
_SPECIAL = (
    "Café Society", "The Writer’s Notebook", "Tom & Jerry’s Guide", "Crème Brûlée at Noon",
    '"Quoted" <Angle> Stories', "Naïve Señor Müller", "L’Été à Paris", "Fish & Chips — A History",
)
# fmt: on
_PROSE = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut "
    "labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris "
    "nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse "
    "cillum fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui "
    "officia deserunt mollit anim id est laborum story novel reader chapter café naïve"
)
_WORDS = tuple(_PROSE.split(" "))


def rng(key: str) -> random.Random:
    """A private generator seeded from `key` (string seeds hash stably across runs)."""
    return random.Random(key)  # noqa: S311 - determinism, not security


@dataclass(frozen=True)
class Book:
    """One catalogue entry; `price_pence` is the price at the catalogue's version."""

    id: int
    title: str
    slug: str
    category: int
    rating: str
    stock: int
    reviews: int
    upc: str
    price_pence: int
    changed_in: int
    """Last version (0 = never) in which this book's price changed."""

    @property
    def price(self) -> str:
        """Price formatted as on the site, e.g. `£51.77`."""
        return f"£{self.price_pence // 100}.{self.price_pence % 100:02d}"


def slugify(text: str) -> str:
    """ASCII slug like books.toscrape.com: `Café & Co` -> `cafe-co`."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-") or "book"


def category_slug(index: int) -> str:
    """Path segment of a category, e.g. `travel_2` (1-based like the real site)."""
    return f"{slugify(CATEGORIES[index])}_{index + 2}"


def make_title(gen: random.Random, book_id: int) -> str:
    """A deterministic title; every seventh one exercises non-ASCII and HTML entities."""
    if book_id % 7 == 3:
        return f"{gen.choice(_SPECIAL)} {book_id}"
    words = [gen.choice(_ADJECTIVES), gen.choice(_NOUNS)]
    if gen.random() < 0.5:
        words = ["The", *words, "of", gen.choice(_NOUNS)]
    return f"{' '.join(words)} {book_id}"


def _new_price(seed: int, version: int, book_id: int, old: int) -> int:
    gen = rng(f"{seed}/price/{version}/{book_id}")
    delta = gen.randint(1, 900) * gen.choice((-1, 1))
    new = old + delta
    return new if 500 <= new <= 9999 else old - delta


def generate_books(books: int, seed: int, version: int, changed_fraction: float) -> list[Book]:
    """All books at `version`; each version re-prices a seeded `changed_fraction` of them."""
    gen = rng(f"{seed}/books")
    result: list[Book] = []
    for book_id in range(1, books + 1):
        title = make_title(gen, book_id)
        result.append(
            Book(
                id=book_id,
                title=title,
                slug=f"{slugify(title)}_{book_id}",
                category=gen.randrange(len(CATEGORIES)),
                rating=gen.choice(RATINGS),
                stock=gen.randint(1, 22),
                reviews=gen.randint(0, 40),
                upc=f"{gen.getrandbits(64):016x}",
                price_pence=gen.randint(1000, 5999),
                changed_in=0,
            )
        )
    per_version = round(changed_fraction * books)
    for v in range(1, version + 1):
        for index in rng(f"{seed}/changes/{v}").sample(range(books), per_version):
            old = result[index]
            result[index] = replace(old, price_pence=_new_price(seed, v, old.id, old.price_pence), changed_in=v)
    return result


def lorem(seed: int, book_id: int, length: int) -> str:
    """Deterministic filler prose of roughly `length` characters for a book."""
    gen = rng(f"{seed}/text/{book_id}")
    words: list[str] = []
    size = 0
    while size < length:
        word = gen.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    words[0] = words[0].capitalize()
    return " ".join(words)[:length].rstrip() + "."
