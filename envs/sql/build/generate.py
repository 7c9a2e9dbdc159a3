"""SQLLookup's generators: a small company database and questions about it with gold SQL, both built from a seed.

The database (``data/company_v0.sqlite``, 6 tables, ~5,500 rows, 400 kB) is made by :func:`build_database` from
``random.Random(0)`` with the standard library's ``sqlite3``: fixed page size, rollback journal,
rows inserted in one order, ``VACUUM`` at the end and nothing taken from the clock, so two builds
with the same SQLite version are byte-identical (bytes 96–99 of the file record the SQLite version
that wrote it; :func:`content_sha256` is a checksum of the schema and rows that any version
reproduces). Schema::

    departments  (id, name, location, budget, head_id → employees)               9 rows
    employees    (id, first_name, last_name, email, job_title, department_id → departments,
                  manager_id → employees, hire_date, end_date, salary, commission_pct)
    customers    (id, company_name, contact_name, email, city, country, segment, signup_date,
                  credit_limit, account_manager_id → employees)
    products     (id, sku, name, category, unit_price, units_in_stock, discontinued)
    orders       (id, customer_id → customers, employee_id → employees, order_date, shipped_date,
                  status, shipping_fee)
    order_items  (order_id → orders, product_id → products, quantity, unit_price, discount)

Dates are ISO text (``'2023-04-17'``); the data ends on 2024-12-31. NULLs mean something: no
department (contractors), no manager (the CEO), still employed (``end_date``), no email on file,
no credit (prepaid), a web-shop order (``employee_id``), not shipped yet (``shipped_date``). Text
is mixed case (``'Research & Development'``, ``"O'Malley Catering"``, ``'eVolve Systems'``).

The questions (``data/sql_tasks_v0.jsonl``) are made by :func:`build_tasks` from question families
written for this schema, each filled in with values drawn from the data, one JSON object a line::

    {"id": "customers_in_country-1", "question": "How many customers are based in Germany?",
     "gold_sql": "SELECT COUNT(*) FROM customers WHERE country = 'Germany'",
     "difficulty": "single_table", "split": "train", "ordered": false, "family": "customers_in_country",
     "distractors": ["SELECT COUNT(*) FROM customers WHERE country = 'germany'", ...]}

``difficulty`` is one of ``single_table``, ``join``, ``aggregate``, ``nested``, ``date``; ``split``
is ``train`` or ``test`` (the instances of each family are divided between both); ``ordered`` says
whether row order is part of the answer (the gold query's top-level ``ORDER BY``, checked to leave
no ties to chance); ``distractors`` are three plausible wrong queries, one of each kind — a logic
slip that returns a wrong result, a value slip that returns nothing (a case mismatch, ``= NULL``, a
badly written date), a schema slip that fails (a guessed column name) — used as the discrete view's
candidate answers. Every gold query runs through :class:`~agentgym.envs.sql.safety.ReadOnlySQLite`
and returns a non-empty answer (not a lone 0 or NULL) of at most 25 rows. v0 holds 180 questions
(106 train, 74 test) from 35 families and 12 one-off questions. v1 (``data/sql_tasks_v1.jsonl``,
:func:`build_tasks_v1`) draws up to 24 instances of each family from the same database with seed 1.

Both files ship with SHA-256 checksums (:data:`DATABASE_V0_SHA256`, :data:`TASKS_V0_SHA256`) that
:func:`~agentgym.envs.sql.dataset.load_tasks` and the env verify. Rebuild them with
``python -m agentgym.envs.sql.build.generate``.

For training only: :func:`build_training_tasks` draws fresh questions of the families on the v0 database, and
:func:`build_training_set` (``python -m agentgym.envs.sql.build.generate --training-set``) builds the shipped training
set (``company_training.sqlite``, ``sql_tasks_training.jsonl``; the env's ``task_set="training"``): a database of the
same schema from :data:`TRAINING_VOCABULARY` (v0's values and more) and the families' questions on it. Neither ever
holds a task of a frozen test split, judged by what its question and gold query mean to SQLite
(:func:`assert_no_test_leak`, :mod:`~agentgym.envs.sql.leaks`).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentgym.core.data import sha256_file
from agentgym.envs.sql.dataset import (
    DATA_DIR,
    DATABASE_V0,
    DATABASE_V0_CONTENT_SHA256,
    DATABASE_V0_SHA256,
    TASKS_V0,
    TASKS_V0_SHA256,
    TASKS_V1,
    TASKS_V1_SHA256,
    TRAINING_DATABASE,
    TRAINING_DATABASE_SHA256,
    TRAINING_TASKS,
    TRAINING_TASKS_SHA256,
    SQLTask,
    content_sha256,
    has_top_level_order_by,
    load_tasks,
    write_tasks,
)
from agentgym.envs.sql.leaks import LeakCheck

__all__ = [
    "TRAINING_VOCABULARY",
    "V0_VOCABULARY",
    "Vocabulary",
    "assert_no_test_leak",
    "build_database",
    "build_tasks",
    "build_tasks_v1",
    "build_training_set",
    "build_training_tasks",
    "test_leak_check",
    "test_tasks",
]

V1_SEED = 1
V1_INSTANCES = 24
TRAINING_SEED = 2
TRAINING_INSTANCES = 48
"""Defaults of :func:`build_training_tasks`: a seed no shipped set uses, and up to 48 instances a family."""
BUILT_WITH_SQLITE = "3.40.1"
"""The SQLite version that wrote the shipped file (other versions rebuild the same content, not the same bytes)."""
END_DATE = dt.date(2024, 12, 31)


# ============================================================================ the database

SCHEMA = """\
CREATE TABLE departments (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    location TEXT NOT NULL,
    budget INTEGER NOT NULL,                      -- yearly budget in USD
    head_id INTEGER REFERENCES employees (id)     -- NULL: no head appointed
);
CREATE TABLE employees (
    id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    job_title TEXT NOT NULL,
    department_id INTEGER REFERENCES departments (id),  -- NULL: contractor without a department
    manager_id INTEGER REFERENCES employees (id),       -- NULL: reports to nobody (the CEO)
    hire_date TEXT NOT NULL,                            -- 'YYYY-MM-DD'
    end_date TEXT,                                      -- last day of work; NULL while employed
    salary INTEGER NOT NULL,                            -- yearly, USD
    commission_pct REAL                                 -- sales staff only, e.g. 0.05 = 5 %
);
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    company_name TEXT NOT NULL UNIQUE,
    contact_name TEXT NOT NULL,
    email TEXT,                                         -- NULL: none on file
    city TEXT NOT NULL,
    country TEXT NOT NULL,
    segment TEXT NOT NULL,                              -- 'Enterprise', 'Mid-Market' or 'SMB'
    signup_date TEXT NOT NULL,
    credit_limit INTEGER,                               -- USD; NULL: prepaid, no credit
    account_manager_id INTEGER REFERENCES employees (id)
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL,
    unit_price REAL NOT NULL,                           -- current list price, USD
    units_in_stock INTEGER NOT NULL,
    discontinued INTEGER NOT NULL DEFAULT 0             -- 1: no longer sold
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    employee_id INTEGER REFERENCES employees (id),      -- the sales rep; NULL: web-shop order
    order_date TEXT NOT NULL,
    shipped_date TEXT,                                  -- NULL: not shipped
    status TEXT NOT NULL,                               -- 'Pending', 'Shipped', 'Delivered' or 'Cancelled'
    shipping_fee REAL NOT NULL
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders (id),
    product_id INTEGER NOT NULL REFERENCES products (id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    unit_price REAL NOT NULL,                           -- price charged per unit, USD
    discount REAL NOT NULL DEFAULT 0,                   -- fraction, e.g. 0.1 = 10 % off
    PRIMARY KEY (order_id, product_id)
);
CREATE INDEX orders_customer_id ON orders (customer_id);
CREATE INDEX order_items_product_id ON order_items (product_id);
"""

# (name, location, budget, head title, [(title, count, base salary)])
_DEPARTMENTS: tuple[tuple[str, str, int, str, int, tuple[tuple[str, int, int], ...]], ...] = (
    ("Operations", "New York", 2_400_000, "Chief Executive Officer", 265_000,
     (("Operations Manager", 2, 98_000), ("Operations Analyst", 4, 72_000), ("Executive Assistant", 3, 58_000))),
    ("Engineering", "Berlin", 9_800_000, "VP of Engineering", 210_000,
     (("Engineering Manager", 3, 150_000), ("Senior Software Engineer", 10, 128_000),
      ("Software Engineer", 16, 98_000), ("QA Engineer", 6, 82_000), ("DevOps Engineer", 4, 112_000))),
    ("Sales", "New York", 6_100_000, "VP of Sales", 195_000,
     (("Sales Manager", 2, 125_000), ("Account Executive", 12, 88_000), ("Sales Representative", 15, 64_000))),
    ("Marketing", "London", 3_200_000, "Marketing Director", 160_000,
     (("Marketing Manager", 3, 96_000), ("Content Writer", 4, 61_000), ("Marketing Analyst", 4, 70_000),
      ("Graphic Designer", 2, 66_000))),
    ("Finance", "New York", 2_100_000, "Chief Financial Officer", 220_000,
     (("Accountant", 5, 74_000), ("Financial Analyst", 4, 86_000), ("Payroll Specialist", 2, 62_000))),
    ("Human Resources", "London", 1_300_000, "HR Director", 142_000,
     (("HR Generalist", 4, 63_000), ("Recruiter", 3, 67_000))),
    ("Customer Support", "Toronto", 1_900_000, "Support Director", 131_000,
     (("Support Team Lead", 2, 78_000), ("Support Specialist", 19, 52_000))),
    ("Research & Development", "Berlin", 4_300_000, "Head of Research", 188_000,
     (("Research Scientist", 7, 118_000), ("Data Scientist", 5, 115_000), ("Lab Technician", 3, 64_000))),
    ("Legal", "New York", 900_000, "", 0, ()),  # newly created: no head, no staff yet
)  # fmt: skip
_TEAM_LEADS = {"Engineering Manager", "Sales Manager", "Support Team Lead", "Operations Manager"}
_COMMISSION = {"Sales Manager": (0.02,), "Account Executive": (0.05, 0.075, 0.1), "Sales Representative": (0.05, 0.08)}

_FIRST_NAMES = (
    "Aaliyah Adam Aiko Alejandro Amara Ana Andrei Anika Arjun Ava Beatriz Ben Camila Carlos Chen Chloe Daniel "
    "Diego Elena Emeka Emma Farah Felix Fatima Gabriel Grace Hana Hannah Hiroshi Ibrahim Isabel Ivan Jamal "
    "James Jana Javier Jin Julia Kai Kenji Lara Leila Liam Lina Lucas Maya Mateo Mei Mia Mohammed Nadia Noah "
    "Nora Olivia Omar Oscar Priya Rafael Ravi Rosa Sara Sofia Stefan Tariq Tomas Valentina Wei Yara Yusuf Zoe"
).split()
_LAST_NAMES = (
    "Abara Alvarez Andersen Bauer Becker Brown Campbell Chen Costa Dubois Fischer Garcia Gomez Haddad Hansen "
    "Hoffmann Ivanova Jensen Kim Kowalski Kumar Larsen Lee Lopez Martin Meyer Mori Müller Nakamura Nguyen "
    "Novak Okafor Olsen Park Patel Petrov Popescu Rossi Santos Schmidt Silva Singh Sato Tanaka Walker Weber "
    "Williams Wong Yilmaz Zhang"
).split() + ["O'Connor", "McDonald", "van der Berg", "DeLuca", "MacLeod", "de Souza"]

_PLACES = (
    ("Berlin", "Germany"), ("Munich", "Germany"), ("Hamburg", "Germany"), ("London", "United Kingdom"),
    ("Manchester", "United Kingdom"), ("New York", "United States"), ("Chicago", "United States"),
    ("Austin", "United States"), ("Seattle", "United States"), ("Toronto", "Canada"), ("Vancouver", "Canada"),
    ("Paris", "France"), ("Lyon", "France"), ("Madrid", "Spain"), ("Barcelona", "Spain"), ("Tokyo", "Japan"),
    ("Osaka", "Japan"), ("São Paulo", "Brazil"), ("Sydney", "Australia"), ("Melbourne", "Australia"),
    ("Amsterdam", "Netherlands"), ("Rotterdam", "Netherlands"), ("Bengaluru", "India"), ("Mumbai", "India"),
)  # fmt: skip
_SUFFIX = {
    "Germany": "GmbH", "United Kingdom": "Ltd", "United States": "Inc.", "Canada": "Corp.", "France": "SARL",
    "Spain": "S.L.", "Japan": "K.K.", "Brazil": "Ltda.", "Australia": "Pty Ltd", "Netherlands": "B.V.",
    "India": "Pvt Ltd",
}  # fmt: skip
_PREFIXES = (
    "Blue Northern Summit Silver Green Bright Iron Golden Pacific Atlas Red Urban Harbor Evergreen Maple "
    "Crystal Cedar Quantum Nova Polar Granite Coral Falcon Orchid"
).split()
_NOUNS = (
    "Analytics Foods Logistics Media Systems Partners Labs Outfitters Dynamics Trading Studios Health Energy "
    "Robotics Textiles Builders"
).split()
_SPECIAL_CUSTOMERS = (
    "O'Malley Catering", "Fisher's Fine Foods", "McAllister & Sons", "eVolve Systems", "iCore Labs",
    "NORTHWIND Traders", "bluebird Analytics", "DeWitt Engineering", "Müller & Töchter", "café Lumière",
    "Kaito & Co", "ZenGarden Wellness",
)  # fmt: skip

# (category, sku prefix, price range, [names])
_PRODUCTS: tuple[tuple[str, str, tuple[int, int], tuple[str, ...]], ...] = (
    ("Electronics", "ELE", (25, 900), (
        "USB-C Hub 7-in-1", "27-inch 4K Monitor", "Wireless Keyboard", "Ergonomic Mouse", "Noise-Cancelling Headset",
        "HD Webcam", "eReader Pro", "Portable SSD 1TB", "Laptop Docking Station", "Smart Conference Speaker",
        "Document Scanner", "Label Printer", "Tablet Stand", "Power Bank 20000mAh")),
    ("Office Furniture", "FUR", (60, 1400), (
        "Standing Desk", "Ergonomic Office Chair", "Filing Cabinet", "Bookshelf Oak", "Meeting Table",
        "Monitor Arm", "Acoustic Booth", "Footrest", "Whiteboard on Wheels", "Lounge Sofa")),
    ("Office Supplies", "SUP", (2, 60), (
        "A4 Copy Paper (500 sheets)", "Gel Pens (12 pack)", "Sticky Notes", "Stapler", "Desk Organizer",
        "Whiteboard Markers", "Notebook A5", "Writer's Notebook A4", "Paper Clips (1000)", "Envelopes C4",
        "Highlighters (6 pack)", "Binder Clips", "Printer Toner Black", "Desk Lamp LED")),
    ("Software", "SFT", (15, 1200), (
        "Office Suite License", "Antivirus (1 year)", "Project Planner Pro", "CRM Starter Seat", "PDF Editor",
        "Cloud Backup 1TB", "Design Studio", "Accounting Basic", "VPN Business Seat", "Password Vault Team")),
    ("Books", "BKS", (12, 80), (
        "SQL for Analysts", "The Lean Office", "Managing Remote Teams", "Python Data Handbook",
        "Negotiation Basics", "Design Systems", "Statistics Done Right", "The Customer Journey")),
    ("Networking", "NET", (20, 700), (
        "Wi-Fi 6 Router", "24-Port Switch", "Cat6 Cable 10m", "Mesh Access Point", "Firewall Appliance",
        "PoE Injector", "Network Tester", "Rack Shelf 19-inch")),
)  # fmt: skip
_NEVER_ORDERED = {
    "Tablet Stand", "Power Bank 20000mAh", "Lounge Sofa", "Envelopes C4", "Password Vault Team",
    "The Customer Journey", "Rack Shelf 19-inch", "Acoustic Booth",
}  # fmt: skip
_DISCONTINUED = {"eReader Pro", "Footrest", "Binder Clips", "Antivirus (1 year)", "Negotiation Basics", "PoE Injector"}


def _day(rng: random.Random, start: dt.date, end: dt.date) -> dt.date:
    return start + dt.timedelta(days=rng.randrange((end - start).days + 1))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower().replace("ü", "u").replace("ö", "o").replace("é", "e"))


@dataclass(frozen=True)
class Vocabulary:
    """What a company database is made of: departments and their staff, names, places, company-name parts and
    products, and how many customers and orders it has. The defaults are v0's (:data:`V0_VOCABULARY`);
    :data:`TRAINING_VOCABULARY` adds values, for training databases whose questions take more slot values than v0's
    (:func:`build_training_set`)."""

    departments: tuple[tuple[str, str, int, str, int, tuple[tuple[str, int, int], ...]], ...] = _DEPARTMENTS
    first_names: tuple[str, ...] = tuple(_FIRST_NAMES)
    last_names: tuple[str, ...] = tuple(_LAST_NAMES)
    places: tuple[tuple[str, str], ...] = _PLACES
    suffix: tuple[tuple[str, str], ...] = tuple(_SUFFIX.items())
    prefixes: tuple[str, ...] = tuple(_PREFIXES)
    nouns: tuple[str, ...] = tuple(_NOUNS)
    special_customers: tuple[str, ...] = _SPECIAL_CUSTOMERS
    products: tuple[tuple[str, str, tuple[int, int], tuple[str, ...]], ...] = _PRODUCTS
    never_ordered: frozenset[str] = frozenset(_NEVER_ORDERED)
    discontinued: frozenset[str] = frozenset(_DISCONTINUED)
    customers: int = 320
    orders: int = 1600
    first_year: int = 2022
    """Orders run from this year to :data:`END_DATE`; customers sign up from two years before."""


V0_VOCABULARY = Vocabulary()

# More of everything a question's slot is filled from, for training databases: every v0 value stays, new ones join.
_MORE_DEPARTMENTS: tuple[tuple[str, str, int, str, int, tuple[tuple[str, int, int], ...]], ...] = (
    ("Procurement", "Chicago", 1_100_000, "Head of Procurement", 150_000,
     (("Buyer", 5, 68_000), ("Procurement Analyst", 3, 74_000))),
    ("Facilities", "Toronto", 800_000, "Facilities Director", 125_000,
     (("Facilities Coordinator", 4, 55_000), ("Maintenance Technician", 5, 50_000))),
    ("Product Management", "Berlin", 2_600_000, "VP of Product", 205_000,
     (("Product Manager", 6, 122_000), ("Product Analyst", 4, 88_000))),
    ("Data Platform", "Amsterdam", 3_500_000, "Head of Data", 195_000,
     (("Data Engineer", 8, 118_000), ("Analytics Engineer", 4, 104_000))),
    ("Quality Assurance", "Lyon", 1_200_000, "QA Director", 140_000,
     (("Test Analyst", 5, 70_000), ("Automation Engineer", 4, 96_000))),
    ("IT Support", "Madrid", 900_000, "IT Manager", 118_000,
     (("IT Technician", 6, 54_000), ("Systems Administrator", 3, 84_000))),
    ("Logistics", "Rotterdam", 1_700_000, "Logistics Director", 138_000,
     (("Warehouse Associate", 8, 46_000), ("Logistics Planner", 3, 66_000))),
    ("Compliance", "London", 1_000_000, "Chief Compliance Officer", 185_000,
     (("Compliance Analyst", 4, 82_000), ("Auditor", 3, 90_000))),
    ("Design", "Paris", 1_400_000, "Design Director", 152_000,
     (("Product Designer", 5, 98_000), ("UX Researcher", 3, 92_000))),
    ("Business Development", "Sydney", 2_000_000, "Head of Partnerships", 170_000,
     (("Partnership Manager", 4, 110_000), ("Business Analyst", 4, 84_000))),
)  # fmt: skip
_MORE_PLACES = (
    ("Milan", "Italy"), ("Rome", "Italy"), ("Turin", "Italy"), ("Zurich", "Switzerland"), ("Geneva", "Switzerland"),
    ("Stockholm", "Sweden"), ("Gothenburg", "Sweden"), ("Oslo", "Norway"), ("Copenhagen", "Denmark"),
    ("Dublin", "Ireland"), ("Cork", "Ireland"), ("Vienna", "Austria"), ("Warsaw", "Poland"), ("Krakow", "Poland"),
    ("Lisbon", "Portugal"), ("Porto", "Portugal"), ("Mexico City", "Mexico"), ("Guadalajara", "Mexico"),
    ("Buenos Aires", "Argentina"), ("Santiago", "Chile"), ("Seoul", "South Korea"), ("Busan", "South Korea"),
    ("Singapore", "Singapore"), ("Auckland", "New Zealand"), ("Wellington", "New Zealand"),
    ("Cape Town", "South Africa"), ("Johannesburg", "South Africa"), ("Nairobi", "Kenya"), ("Lagos", "Nigeria"),
    ("Cairo", "Egypt"), ("Istanbul", "Turkey"), ("Helsinki", "Finland"), ("Brussels", "Belgium"),
    ("Prague", "Czech Republic"), ("Dallas", "United States"), ("Boston", "United States"),
    ("Denver", "United States"), ("Montreal", "Canada"), ("Calgary", "Canada"), ("Marseille", "France"),
    ("Valencia", "Spain"), ("Cologne", "Germany"), ("Frankfurt", "Germany"), ("Edinburgh", "United Kingdom"),
    ("Kyoto", "Japan"), ("Brisbane", "Australia"), ("Utrecht", "Netherlands"), ("Delhi", "India"),
    ("Chennai", "India"), ("Rio de Janeiro", "Brazil"),
)  # fmt: skip
_MORE_SUFFIXES = (
    ("Italy", "S.r.l."), ("Switzerland", "AG"), ("Sweden", "AB"), ("Norway", "AS"), ("Denmark", "ApS"),
    ("Ireland", "Ltd"), ("Austria", "GmbH"), ("Poland", "Sp. z o.o."), ("Portugal", "Lda."), ("Mexico", "S.A."),
    ("Argentina", "S.A."), ("Chile", "SpA"), ("South Korea", "Co. Ltd"), ("Singapore", "Pte. Ltd."),
    ("New Zealand", "Ltd"), ("South Africa", "Pty Ltd"), ("Kenya", "Ltd"), ("Nigeria", "Ltd"), ("Egypt", "S.A.E."),
    ("Turkey", "A.S."), ("Finland", "Oy"), ("Belgium", "NV"), ("Czech Republic", "s.r.o."),
)  # fmt: skip
_MORE_PRODUCTS: tuple[tuple[str, str, tuple[int, int], tuple[str, ...]], ...] = (
    ("Kitchen", "KIT", (8, 300), (
        "Espresso Machine", "Electric Kettle", "Water Filter Jug", "Coffee Grinder", "Microwave Oven", "Mini Fridge",
        "Mug Set (6)", "Toaster", "Dish Rack")),
    ("Lighting", "LGT", (10, 400), (
        "Floor Lamp", "LED Panel", "Smart Bulb Pack", "Wall Sconce", "Clip-on Lamp", "Pendant Light", "Light Strip 5m",
        "Motion Sensor Light")),
    ("Cleaning", "CLN", (3, 250), (
        "Microfiber Cloths (20)", "Glass Cleaner", "Cordless Vacuum", "Disinfectant Wipes", "Trash Bags (100)",
        "Mop and Bucket", "Hand Soap Refill", "Air Purifier")),
    ("Audio", "AUD", (20, 900), (
        "Bluetooth Speaker", "Studio Microphone", "Conference Headphones", "Soundbar", "Audio Interface",
        "Earbuds Pro", "Podcast Kit", "Speaker Stand")),
    ("Storage", "STO", (15, 800), (
        "Archive Box (10)", "Steel Locker", "Shelving Unit", "Drawer Cabinet", "Storage Bin Set", "Key Cabinet",
        "Document Safe", "Mobile Pedestal")),
    ("Security", "SEC", (25, 1200), (
        "IP Camera", "Door Access Reader", "Smart Lock", "Alarm Panel", "Badge Printer", "Cable Lock",
        "Privacy Screen Filter", "Visitor Kiosk")),
    ("Printing", "PRT", (30, 1500), (
        "Laser Printer", "Inkjet Printer", "3D Printer", "Large Format Plotter", "Printer Toner Color",
        "Photo Paper (100)", "Laminator", "Binding Machine")),
    ("Mobile", "MOB", (10, 1100), (
        "Smartphone Case", "Phone Mount", "Wireless Charger", "Rugged Tablet", "Car Charger", "Screen Protector",
        "Mobile Hotspot", "Stylus Pen")),
)  # fmt: skip
TRAINING_VOCABULARY = replace(
    V0_VOCABULARY,
    departments=_DEPARTMENTS + _MORE_DEPARTMENTS,
    first_names=V0_VOCABULARY.first_names
    + tuple(
        "Abebe Akira Amelia Anton Astrid Bianca Bruno Chidi Dmitri Eva Freya Giulia Hamid Ingrid Isak Jonas Kamala "
        "Keiko Lars Leon Lucia Magnus Marco Nina Pablo Rania Sanjay Selin Soren Thabo Tomoko Vera Xin Zara".split()
    ),
    last_names=V0_VOCABULARY.last_names
    + tuple(
        "Achebe Bergstrom Bianchi Castillo Dahl Eriksson Ferrari Gallagher Horvat Jovanovic Kaplan Lindqvist Mendes "
        "Moreau Nowak O'Brien Ortiz Quinn Ramos Ricci Sorensen Takahashi Vargas Virtanen Yamamoto".split()
    ),
    places=_PLACES + _MORE_PLACES,
    suffix=V0_VOCABULARY.suffix + _MORE_SUFFIXES,
    prefixes=V0_VOCABULARY.prefixes
    + tuple(
        "Amber Arctic Aurora Beacon Bold Cobalt Delta Echo Ember Horizon Lunar Meridian Onyx Prairie Sapphire Solar "
        "Sterling Swift Titan Vertex".split()
    ),
    nouns=V0_VOCABULARY.nouns + tuple("Networks Ventures Solutions Supply Consulting Works Retail Group".split()),
    products=_PRODUCTS + _MORE_PRODUCTS,
    never_ordered=V0_VOCABULARY.never_ordered | {"Dish Rack", "Speaker Stand", "Visitor Kiosk", "Stylus Pen"},
    discontinued=V0_VOCABULARY.discontinued | {"Toaster", "Clip-on Lamp", "Podcast Kit", "Laminator", "Cable Lock"},
    customers=900,
    orders=4000,
    first_year=2016,
)
"""v0's vocabulary and more: 10 more departments (with 20 more job titles), 23 more countries, 50 more cities, 8 more
product categories (65 products), more names; 900 customers and 4,000 orders from 2016 on (v0's from 2022), so
that the date questions meet every month name and more years than the test's."""


def _rows(seed: int, vocab: Vocabulary = V0_VOCABULARY) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, from one ``random.Random(seed)`` stream (staff, customers, products, orders)."""
    rng = random.Random(seed)
    departments, employees = _staff(rng, vocab)
    reps = [e for e in employees if e[4] in ("Account Executive", "Sales Representative", "Sales Manager")]
    customers = _customers(rng, vocab, [e for e in reps if e[4] != "Sales Representative"])
    products = _products(rng, vocab)
    orders, items = _orders(rng, vocab, customers, products, reps)
    return {
        "departments": departments,
        "employees": [tuple(e) for e in employees],
        "customers": customers,
        "products": products,
        "orders": orders,
        "order_items": items,
    }


def _staff(rng: random.Random, vocab: Vocabulary) -> tuple[list[tuple[Any, ...]], list[list[Any]]]:
    """The departments and their employees (heads, team leads under the heads, staff under the leads), then four
    contractors under the engineering head."""
    names = [(f, last) for f in vocab.first_names for last in vocab.last_names]
    rng.shuffle(names)
    name_iter = iter(names)
    departments, employees = [], []

    def add_employee(title: str, dept: int | None, manager: int | None, base: int, hired: dt.date) -> int:
        emp_id = len(employees) + 1
        first, last = next(name_iter)
        email = f"{_slug(first)}.{_slug(last)}@northwind-labs.example"
        left = None
        if manager is not None and rng.random() < 0.12:
            left_day = hired + dt.timedelta(days=rng.randrange(120, 2400))
            left = left_day.isoformat() if left_day <= dt.date(2024, 12, 20) else None
        salary = round(base * rng.uniform(0.86, 1.18) / 500) * 500
        commission = rng.choice(_COMMISSION[title]) if title in _COMMISSION else None
        employees.append(
            [emp_id, first, last, email, title, dept, manager, hired.isoformat(), left, salary, commission]
        )
        return emp_id

    ceo = 0
    for dept_id, (name, location, budget, head_title, head_salary, staff) in enumerate(vocab.departments, 1):
        head = None
        if head_title:
            hired = _day(rng, dt.date(2012, 1, 1), dt.date(2016, 12, 31))
            head = add_employee(head_title, dept_id, ceo or None, head_salary, hired)
            ceo = ceo or head
        departments.append((dept_id, name, location, budget, head))
        leads: list[int] = []
        for title, count, base in staff:
            for _ in range(count):
                boss = rng.choice(leads) if leads and title not in _TEAM_LEADS else head
                hired = _day(rng, dt.date(2013, 1, 1), dt.date(2024, 11, 30))
                new = add_employee(title, dept_id, boss, base, hired)
                if title in _TEAM_LEADS:
                    leads.append(new)
    engineering_head = departments[1][4]
    for _ in range(4):
        add_employee("Contractor", None, engineering_head, 70_000, _day(rng, dt.date(2022, 1, 1), END_DATE))
    return departments, employees


def _customers(rng: random.Random, vocab: Vocabulary, account_managers: list[list[Any]]) -> list[tuple[Any, ...]]:
    """The customers: made-up companies (and the vocabulary's special ones), a segment, a credit limit and, for
    most larger accounts, an account manager."""
    customers = []
    companies = [f"{p} {n}" for p in vocab.prefixes for n in vocab.nouns]
    rng.shuffle(companies)
    n_customers = vocab.customers
    suffix = dict(vocab.suffix)
    specials = dict(
        zip(rng.sample(range(n_customers), len(vocab.special_customers)), vocab.special_customers, strict=True)
    )
    limits = {"Enterprise": (50_000, 100_000, 250_000), "Mid-Market": (25_000, 50_000), "SMB": (5_000, 10_000)}
    for cid in range(1, n_customers + 1):
        city, country = rng.choice(vocab.places)
        company = specials.get(cid - 1) or f"{companies[cid]} {suffix[country]}"
        first, last = rng.choice(vocab.first_names), rng.choice(vocab.last_names)
        email = None if rng.random() < 0.12 else f"{_slug(first)}.{_slug(last)}@{_slug(company)}.example"
        segment = rng.choices(("Enterprise", "Mid-Market", "SMB"), (2, 3, 5))[0]
        credit = None if rng.random() < 0.15 else rng.choice(limits[segment])
        manager = rng.choice(account_managers)[0] if segment != "SMB" or rng.random() < 0.4 else None
        signup = _day(rng, dt.date(vocab.first_year - 2, 1, 1), dt.date(2024, 10, 31))
        customers.append(
            (cid, company, f"{first} {last}", email, city, country, segment, signup.isoformat(), credit, manager)
        )
    return customers


def _products(rng: random.Random, vocab: Vocabulary) -> list[tuple[Any, ...]]:
    """The catalogue: each category's products with a SKU, a price in the category's range and a stock count."""
    products = []
    for category, prefix, (low, high), product_names in vocab.products:
        for k, name in enumerate(product_names):
            price = round(rng.uniform(low, high) * rng.uniform(0.8, 1.0)) - 0.01
            price = max(price, 1.49)
            stock = rng.randrange(0, 400)
            products.append(
                (
                    len(products) + 1,
                    f"{prefix}-{1001 + k}",
                    name,
                    category,
                    price,
                    stock,
                    int(name in vocab.discontinued),
                )
            )
    return products


def _orders(
    rng: random.Random,
    vocab: Vocabulary,
    customers: list[tuple[Any, ...]],
    products: list[tuple[Any, ...]],
    reps: list[list[Any]],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The orders from ``vocab.first_year`` to :data:`END_DATE` (more of them later) and their line items: a few
    popular products each, prices 5 points a year lower before the last year, a sales rep where one was active."""

    def active(e: list[Any], day: dt.date) -> bool:
        return e[7] <= day.isoformat() and (e[8] is None or day.isoformat() <= e[8])

    orderable = [p for p in products if p[2] not in vocab.never_ordered]
    popularity = [1 / (1 + (i * 7) % len(orderable)) ** 0.6 for i in range(len(orderable))]
    buyers = [c for c in customers if rng.random() > 0.06]
    weights = [1 / (k + 12) for k in range(len(buyers))]
    orders, items = [], []
    first_day = dt.date(vocab.first_year, 1, 1)
    span = (END_DATE - first_day).days
    for oid in range(1, vocab.orders + 1):
        day = first_day + dt.timedelta(days=int(span * rng.random() ** 0.85))
        customer = rng.choices(buyers, weights)[0]
        rep = None
        manager = next((e for e in reps if e[0] == customer[9]), None)
        if manager is not None and active(manager, day) and rng.random() < 0.85:
            rep = manager[0]
        elif rng.random() < 0.5:
            candidates = [e[0] for e in reps if active(e, day)]
            rep = rng.choice(candidates) if candidates else None
        lines = min(6, 1 + int(rng.expovariate(1 / 1.6)))
        chosen: list[tuple[Any, ...]] = []
        while len(chosen) < lines:
            product = rng.choices(orderable, popularity)[0]
            if product not in chosen and not (product[6] and day.year == 2024):
                chosen.append(product)
        total = 0.0
        factor = 1 - 0.05 * (END_DATE.year - day.year)  # prices rise 5 points a year
        for product in chosen:
            quantity = min(50, 1 + int(rng.expovariate(1 / 3)))
            price = round(product[4] * factor, 2)
            discount = rng.choice((0.0, 0.0, 0.0, 0.0, 0.05, 0.1, 0.15))
            items.append((oid, product[0], quantity, price, discount))
            total += quantity * price * (1 - discount)
        fee = 0.0 if total > 500 else rng.choice((4.99, 9.99, 14.99))
        if rng.random() < 0.05:
            status, shipped = "Cancelled", None
        else:
            ship_day = day + dt.timedelta(days=min(21, 1 + int(rng.expovariate(1 / 3.5))))
            if ship_day > END_DATE:
                status, shipped = "Pending", None
            else:
                status = "Shipped" if ship_day > END_DATE - dt.timedelta(days=6) else "Delivered"
                shipped = ship_day.isoformat()
        orders.append((oid, customer[0], rep, day.isoformat(), shipped, status, fee))
    return orders, items


def build_database(path: str | Path, seed: int = 0, vocabulary: Vocabulary = V0_VOCABULARY) -> str:
    """Write the company database to ``path`` (replacing it) and return the file's SHA-256.

    The build is deterministic: same seed, vocabulary and SQLite version, same bytes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = _rows(seed, vocabulary)
    fd, tmp = tempfile.mkstemp(suffix=".sqlite", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA page_size = 4096")
            conn.execute("PRAGMA journal_mode = DELETE")
            conn.execute("PRAGMA encoding = 'UTF-8'")
            conn.execute("PRAGMA user_version = 1")
            conn.execute("BEGIN")
            for statement in SCHEMA.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            for table, table_rows in rows.items():
                marks = ", ".join("?" * len(table_rows[0]))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})", table_rows)
            conn.execute("COMMIT")
            conn.execute("VACUUM")
        finally:
            conn.close()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return sha256_file(path)


def _the(country: str) -> str:
    """A country's name as it reads in a sentence ("the Netherlands")."""
    return f"the {country}" if country.startswith(("United", "Netherlands")) else country


def _lit(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


_MONTHS = "January February March April May June July August September October November December".split()
_ORDINAL = ("first", "second", "third", "fourth")
_REVENUE = "oi.quantity * oi.unit_price * (1 - oi.discount)"


class _Picker:
    """Draws question parameters from the database being built."""

    def __init__(self, conn: sqlite3.Connection, rng: random.Random, spread: bool = False) -> None:
        self.conn, self.rng, self.spread = conn, rng, spread

    def choices(self, options: tuple[Any, ...]) -> list[Any]:
        """A question's secondary slot: one option drawn at random, or every option when spreading (a training
        set, where each value of the main slot should meet each value of this one)."""
        return list(options) if self.spread else [self.rng.choice(options)]

    def years(self, table: str = "orders", column: str = "order_date", skip: int = 0) -> str:
        """A one-column table ``y`` of the years in ``table.column`` (the first ``skip`` left out), for a
        family that crosses years with another slot."""
        found = [r[0] for r in self.conn.execute(f"SELECT DISTINCT strftime('%Y', {column}) FROM {table} ORDER BY 1")]
        return "(" + " UNION ".join(f"SELECT '{y}' AS y" for y in found[skip:]) + ")"

    def values(self, sql: str) -> list[Any]:
        """The query's rows (first column alone if it has one), shuffled."""
        rows = self.conn.execute(sql).fetchall()
        out = [r[0] if len(r) == 1 else r for r in rows]
        self.rng.shuffle(out)
        return out


Family = Callable[[_Picker], Iterator[tuple[str, str, list[str]]]]
_FAMILIES: list[tuple[str, str, Family]] = []


def _family(name: str, difficulty: str) -> Callable[[Family], Family]:
    def register(fn: Family) -> Family:
        _FAMILIES.append((name, difficulty, fn))
        return fn

    return register


# ----------------------------------------------------------------------------- single table


@_family("customers_in_country", "single_table")
def _customers_in_country(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for c in p.values("SELECT DISTINCT country FROM customers"):
        yield (
            f"How many customers are based in {_the(c)}?",
            f"SELECT COUNT(*) FROM customers WHERE country = {_lit(c)}",
            [
                f"SELECT COUNT(*) FROM customers WHERE country = {_lit(c.lower())}",
                f"SELECT COUNT(DISTINCT city) FROM customers WHERE country = {_lit(c)}",
                f"SELECT COUNT(*) FROM customers WHERE customer_country = {_lit(c)}",
            ],
        )


@_family("product_price", "single_table")
def _product_price(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for n in p.values("SELECT name FROM products WHERE id IN (SELECT product_id FROM order_items)"):
        yield (
            f"What is the current list price of the product '{n}'?",
            f"SELECT unit_price FROM products WHERE name = {_lit(n)}",
            [
                f"SELECT price FROM products WHERE name = {_lit(n)}",
                f"SELECT ROUND(AVG(unit_price), 2) FROM order_items WHERE product_id = "
                f"(SELECT id FROM products WHERE name = {_lit(n)})",
                f"SELECT unit_price FROM products WHERE name = {_lit(n.upper())}",
            ],
        )


@_family("pricey_products_in_category", "single_table")
def _pricey_products(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for cat, price in p.values("SELECT category, unit_price FROM products"):
        yield (
            f"List the {cat} products with a list price above ${price:,.2f}, from the most to the least expensive.",
            f"SELECT name FROM products WHERE category = {_lit(cat)} AND unit_price > {price} ORDER BY unit_price DESC",
            [
                f"SELECT name FROM products WHERE category = {_lit(cat)} AND unit_price >= {price} "
                "ORDER BY unit_price DESC",
                f"SELECT name FROM products WHERE category = {_lit(cat)} AND unit_price > {price} ORDER BY unit_price",
                f"SELECT name FROM products WHERE category = {_lit(cat.lower())} AND unit_price > {price} "
                "ORDER BY unit_price DESC",
            ],
        )


@_family("products_still_sold", "single_table")
def _products_still_sold(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for cat in p.values("SELECT DISTINCT category FROM products"):
        yield (
            f"How many products in the {cat} category are still being sold (not discontinued)?",
            f"SELECT COUNT(*) FROM products WHERE category = {_lit(cat)} AND discontinued = 0",
            [
                f"SELECT COUNT(*) FROM products WHERE category = {_lit(cat)}",
                f"SELECT COUNT(*) FROM products WHERE category = {_lit(cat)} AND discontinued = 1",
                f"SELECT COUNT(*) FROM products WHERE category = {_lit(cat)} AND discontinued = 'no'",
            ],
        )


@_family("customers_without_email", "single_table")
def _customers_without_email(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for city in p.values("SELECT DISTINCT city FROM customers WHERE email IS NULL"):
        yield (
            f"Which customers in {city} have no email address on file? List their company names alphabetically.",
            f"SELECT company_name FROM customers WHERE city = {_lit(city)} AND email IS NULL ORDER BY company_name",
            [
                f"SELECT company_name FROM customers WHERE city = {_lit(city)} AND email = NULL ORDER BY company_name",
                f"SELECT company_name FROM customers WHERE city = {_lit(city)} AND email = '' ORDER BY company_name",
                f"SELECT company_name FROM customers WHERE city = {_lit(city)} AND email IS NOT NULL "
                "ORDER BY company_name",
            ],
        )


@_family("top_salary_for_title", "single_table")
def _top_salary_for_title(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for title in p.values("SELECT job_title FROM employees GROUP BY job_title HAVING COUNT(*) >= 3"):
        yield (
            f"What is the highest salary of anyone currently employed as a {title}?",
            f"SELECT MAX(salary) FROM employees WHERE job_title = {_lit(title)} AND end_date IS NULL",
            [
                f"SELECT MIN(salary) FROM employees WHERE job_title = {_lit(title)} AND end_date IS NULL",
                f"SELECT MAX(salary) FROM employees WHERE job_title = {_lit(title.lower())} AND end_date IS NULL",
                f"SELECT MAX(salary) FROM employees WHERE title = {_lit(title)} AND end_date IS NULL",
            ],
        )


@_family("orders_with_status", "single_table")
def _orders_with_status(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for status in p.values("SELECT DISTINCT status FROM orders"):
        yield (
            f"How many orders have the status {status}?",
            f"SELECT COUNT(*) FROM orders WHERE status = {_lit(status)}",
            [
                f"SELECT COUNT(*) FROM orders WHERE status = {_lit(status.lower())}",
                "SELECT COUNT(*) FROM orders",
                f"SELECT COUNT(*) FROM orders WHERE order_status = {_lit(status)}",
            ],
        )


@_family("employees_by_initial", "single_table")
def _employees_by_initial(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for letter in p.values("SELECT DISTINCT substr(last_name, 1, 1) FROM employees"):
        yield (
            f"List the first and last names of all employees whose last name starts with '{letter}', "
            "ordered by last name and then by first name.",
            f"SELECT first_name, last_name FROM employees WHERE last_name LIKE '{letter}%' "
            "ORDER BY last_name, first_name",
            [
                f"SELECT first_name, last_name FROM employees WHERE last_name LIKE '{letter}%' ORDER BY first_name",
                f"SELECT first_name, last_name FROM employees WHERE first_name LIKE '{letter}%' "
                "ORDER BY last_name, first_name",
                f"SELECT first_name, last_name FROM employees WHERE surname LIKE '{letter}%' "
                "ORDER BY last_name, first_name",
                f"SELECT first_name, last_name FROM employees WHERE last_name = '{letter}' "
                "ORDER BY last_name, first_name",
            ],
        )


# ----------------------------------------------------------------------------- joins


@_family("department_headcount", "join")
def _department_headcount(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for dept in p.values("SELECT name FROM departments"):
        yield (
            f"How many people currently work in the {dept} department?",
            "SELECT COUNT(*) FROM employees e JOIN departments d ON d.id = e.department_id "
            f"WHERE d.name = {_lit(dept)} AND e.end_date IS NULL",
            [
                "SELECT COUNT(*) FROM employees e JOIN departments d ON d.id = e.department_id "
                f"WHERE d.name = {_lit(dept)}",
                "SELECT COUNT(*) FROM employees e JOIN departments d ON d.id = e.department_id "
                f"WHERE d.name = {_lit(dept.lower())} AND e.end_date IS NULL",
                f"SELECT COUNT(*) FROM employees WHERE department = {_lit(dept)} AND end_date IS NULL",
            ],
        )


@_family("products_bought_by_customer", "join")
def _products_bought_by_customer(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for name in p.values("SELECT company_name FROM customers WHERE id IN (SELECT customer_id FROM orders)"):
        base = (
            "FROM orders o JOIN order_items oi ON oi.order_id = o.id JOIN products p ON p.id = oi.product_id "
            f"JOIN customers c ON c.id = o.customer_id WHERE c.company_name = {_lit(name)} ORDER BY p.name"
        )
        yield (
            f"Which products has {name} ordered? List each product name once, in alphabetical order.",
            f"SELECT DISTINCT p.name {base}",
            [
                f"SELECT p.name {base}",
                f"SELECT DISTINCT p.name {base.replace('p.id = oi.product_id', 'p.id = oi.order_id')}",
                f"SELECT DISTINCT p.name {base.replace(_lit(name), _lit(name.upper()))}",
            ],
        )


@_family("manager_of_employee", "join")
def _manager_of_employee(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for first, last in p.values("SELECT first_name, last_name FROM employees WHERE manager_id IS NOT NULL"):
        where = f"WHERE e.first_name = {_lit(first)} AND e.last_name = {_lit(last)}"
        yield (
            f"Who is {first} {last}'s manager? Give the manager's first and last name.",
            f"SELECT m.first_name, m.last_name FROM employees e JOIN employees m ON m.id = e.manager_id {where}",
            [
                f"SELECT m.first_name, m.last_name FROM employees e JOIN employees m ON e.id = m.manager_id {where}",
                f"SELECT e.first_name, e.last_name FROM employees e {where}",
                f"SELECT m.first_name, m.last_name FROM employees e JOIN employees m ON m.id = e.manager {where}",
            ],
        )


@_family("department_head", "join")
def _department_head(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for dept in p.values("SELECT name FROM departments WHERE head_id IS NOT NULL"):
        yield (
            f"Who heads the {dept} department? Give their first and last name.",
            "SELECT e.first_name, e.last_name FROM departments d JOIN employees e ON e.id = d.head_id "
            f"WHERE d.name = {_lit(dept)}",
            [
                "SELECT e.first_name, e.last_name FROM departments d JOIN employees e ON e.department_id = d.id "
                f"WHERE d.name = {_lit(dept)}",
                "SELECT e.first_name, e.last_name FROM departments d JOIN employees e ON e.id = d.id "
                f"WHERE d.name = {_lit(dept)}",
                "SELECT e.first_name, e.last_name FROM departments d JOIN employees e ON e.id = d.manager_id "
                f"WHERE d.name = {_lit(dept)}",
            ],
        )


@_family("sales_rep_of_order", "join")
def _sales_rep_of_order(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for oid in p.values("SELECT id FROM orders WHERE employee_id IS NOT NULL"):
        yield (
            f"Which sales representative handled order number {oid}? Give their first and last name.",
            "SELECT e.first_name, e.last_name FROM orders o JOIN employees e ON e.id = o.employee_id "
            f"WHERE o.id = {oid}",
            [
                "SELECT e.first_name, e.last_name FROM orders o JOIN employees e ON e.id = o.customer_id "
                f"WHERE o.id = {oid}",
                f"SELECT c.contact_name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = {oid}",
                "SELECT e.first_name, e.last_name FROM orders o JOIN employees e ON e.id = o.employee_id "
                f"WHERE o.order_id = {oid}",
            ],
        )


@_family("units_sold_of_product", "join")
def _units_sold_of_product(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for name in p.values("SELECT name FROM products WHERE id IN (SELECT product_id FROM order_items)"):
        base = (
            "FROM order_items oi JOIN products p ON p.id = oi.product_id JOIN orders o ON o.id = oi.order_id "
            f"WHERE p.name = {_lit(name)}"
        )
        yield (
            f"How many units of '{name}' have been ordered in total, not counting cancelled orders?",
            f"SELECT SUM(oi.quantity) {base} AND o.status <> 'Cancelled'",
            [
                f"SELECT SUM(oi.quantity) {base}",
                f"SELECT COUNT(*) {base} AND o.status <> 'Cancelled'",
                f"SELECT SUM(oi.quantity) {base} AND o.status <> 'Cancelled' AND o.shipped_date IS NULL",
            ],
        )


@_family("customers_of_account_manager", "join")
def _customers_of_account_manager(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for first, last in p.values(
        "SELECT first_name, last_name FROM employees WHERE id IN "
        "(SELECT account_manager_id FROM customers GROUP BY 1 HAVING COUNT(*) BETWEEN 2 AND 15)"
    ):
        base = (
            "FROM customers c JOIN employees e ON e.id = c.account_manager_id "
            f"WHERE e.first_name = {_lit(first)} AND e.last_name = {_lit(last)}"
        )
        yield (
            f"Which customers have {first} {last} as their account manager? List the company names alphabetically.",
            f"SELECT c.company_name {base} ORDER BY c.company_name",
            [
                f"SELECT c.company_name {base} ORDER BY c.company_name DESC",
                "SELECT DISTINCT c.company_name FROM orders o JOIN customers c ON c.id = o.customer_id "
                f"JOIN employees e ON e.id = o.employee_id WHERE e.first_name = {_lit(first)} "
                f"AND e.last_name = {_lit(last)} ORDER BY c.company_name",
                f"SELECT c.company_name {base.replace('c.account_manager_id', 'c.manager_id')} ORDER BY c.company_name",
            ],
        )


# ----------------------------------------------------------------------------- aggregates


@_family("top_customers_by_orders", "aggregate")
def _top_customers_by_orders(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    countries = p.values("SELECT DISTINCT country FROM customers")
    for country, n in ((c, n) for c in countries for n in p.choices((3, 4, 5))):
        base = f"FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.country = {_lit(country)} GROUP BY c.id"
        yield (
            f"Which {n} customers from {_the(country)} have placed the most orders? Give each company name and its "
            "number of orders, most orders first.",
            f"SELECT c.company_name, COUNT(*) AS orders {base} ORDER BY orders DESC LIMIT {n}",
            [
                f"SELECT c.company_name, COUNT(*) AS orders {base} ORDER BY orders LIMIT {n}",
                f"SELECT c.company_name, COUNT(o.order_id) AS orders {base} ORDER BY orders DESC LIMIT {n}",
                f"SELECT c.company_name, COUNT(*) AS orders {base} ORDER BY orders DESC LIMIT {n + 1}",
            ],
        )


@_family("category_revenue_in_year", "aggregate")
def _category_revenue(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for cat, year in p.values(f"SELECT DISTINCT category, y FROM products, {p.years()}"):
        base = (
            "FROM order_items oi JOIN products p ON p.id = oi.product_id JOIN orders o ON o.id = oi.order_id "
            f"WHERE p.category = {_lit(cat)} AND strftime('%Y', o.order_date) = '{year}'"
        )
        unquoted = base.replace(f"'{year}'", year)  # the year as a number: never equal to strftime's text
        yield (
            f"What was the total revenue from {cat} products on orders placed in {year}, excluding cancelled "
            "orders? Revenue is quantity × unit price charged × (1 − discount); round to 2 decimals.",
            f"SELECT ROUND(SUM({_REVENUE}), 2) {base} AND o.status <> 'Cancelled'",
            [
                f"SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) {base} AND o.status <> 'Cancelled'",
                f"SELECT ROUND(SUM({_REVENUE}), 2) {unquoted} AND o.status <> 'Cancelled'",
                f"SELECT ROUND(SUM(oi.quantity * p.unit_price * (1 - oi.discount)), 2) {base} "
                "AND o.status <> 'Cancelled'",
            ],
        )


@_family("categories_with_many_products", "aggregate")
def _categories_with_many(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for k in p.values("SELECT DISTINCT COUNT(*) - 1 FROM products WHERE discontinued = 0 GROUP BY category"):
        yield (
            f"Which product categories have more than {k} products that are still being sold? "
            "List the categories alphabetically.",
            f"SELECT category FROM products WHERE discontinued = 0 GROUP BY category HAVING COUNT(*) > {k} "
            "ORDER BY category",
            [
                f"SELECT category FROM products WHERE discontinued = 0 GROUP BY category HAVING COUNT(*) > {k + 1} "
                "ORDER BY category",
                f"SELECT category FROM products GROUP BY category HAVING COUNT(*) > {k} ORDER BY category",
                f"SELECT category FROM products WHERE discontinued = 0 GROUP BY category HAVING COUNT(*) > {k} "
                "ORDER BY COUNT(*) DESC",
                f"SELECT category FROM products WHERE discontinued = 'false' GROUP BY category HAVING COUNT(*) > {k} "
                "ORDER BY category",
            ],
        )


@_family("department_average_salary", "aggregate")
def _department_average_salary(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for dept in p.values("SELECT name FROM departments WHERE head_id IS NOT NULL"):
        base = f"FROM employees e JOIN departments d ON d.id = e.department_id WHERE d.name = {_lit(dept)}"
        yield (
            f"What is the average salary of the current employees of the {dept} department, rounded to whole dollars?",
            f"SELECT ROUND(AVG(e.salary)) {base} AND e.end_date IS NULL",
            [
                f"SELECT ROUND(AVG(e.salary)) {base}",
                f"SELECT SUM(e.salary) {base} AND e.end_date IS NULL",
                f"SELECT ROUND(AVG(e.salary)) {base.replace(_lit(dept), _lit(dept.upper()))} AND e.end_date IS NULL",
            ],
        )


@_family("distinct_buyers_of_product", "aggregate")
def _distinct_buyers(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for name in p.values("SELECT name FROM products WHERE id IN (SELECT product_id FROM order_items)"):
        base = (
            "FROM orders o JOIN order_items oi ON oi.order_id = o.id JOIN products p ON p.id = oi.product_id "
            f"WHERE p.name = {_lit(name)}"
        )
        yield (
            f"How many different customers have placed at least one order that includes '{name}'?",
            f"SELECT COUNT(DISTINCT o.customer_id) {base}",
            [
                f"SELECT COUNT(*) {base}",
                f"SELECT COUNT(DISTINCT o.employee_id) {base}",
                f"SELECT COUNT(DISTINCT o.customer_id) {base.replace(_lit(name), _lit(name.lower()))}",
            ],
        )


@_family("top_earner_in_department", "aggregate")
def _top_earner(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for dept in p.values("SELECT name FROM departments WHERE head_id IS NOT NULL"):
        base = (
            "FROM employees e JOIN departments d ON d.id = e.department_id "
            f"WHERE d.name = {_lit(dept)} AND e.end_date IS NULL"
        )
        yield (
            f"Excluding the head of the department, who is the highest-paid current employee of the {dept} "
            "department? Give first name, last name and salary.",
            f"SELECT e.first_name, e.last_name, e.salary {base} AND e.id <> d.head_id ORDER BY e.salary DESC LIMIT 1",
            [
                f"SELECT e.first_name, e.last_name, e.salary {base} ORDER BY e.salary DESC LIMIT 1",
                f"SELECT e.first_name, e.last_name, e.salary {base} AND e.id <> d.head_id ORDER BY e.salary LIMIT 1",
                f"SELECT e.first_name, e.last_name, MAX(e.salary) FROM employees e WHERE e.department = {_lit(dept)}",
            ],
        )


@_family("orders_by_status_in_year", "aggregate")
def _orders_by_status(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for year in p.values("SELECT DISTINCT strftime('%Y', order_date) FROM orders"):
        base = f"FROM orders WHERE strftime('%Y', order_date) = '{year}' GROUP BY status"
        unquoted = base.replace(f"'{year}'", year)
        yield (
            f"How many orders placed in {year} have each status? Give the status and the number of orders, "
            "from the most common status to the least common.",
            f"SELECT status, COUNT(*) AS n {base} ORDER BY n DESC",
            [
                f"SELECT status, COUNT(*) AS n {base} ORDER BY status",
                f"SELECT status, COUNT(*) AS n {unquoted} ORDER BY n DESC",
                f"SELECT status, COUNT(shipped_date) AS n {base} ORDER BY n DESC",
            ],
        )


@_family("countries_by_credit", "aggregate")
def _countries_by_credit(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for total in p.values("SELECT SUM(credit_limit) FROM customers GROUP BY country"):
        threshold = int(total) - 1_000
        yield (
            f"Which countries have customers whose credit limits add up to more than ${threshold:,}? Give each "
            "country and its total credit limit, largest total first.",
            f"SELECT country, SUM(credit_limit) AS total FROM customers GROUP BY country HAVING total > {threshold} "
            "ORDER BY total DESC",
            [
                f"SELECT country, SUM(credit_limit) AS total FROM customers WHERE credit_limit > {threshold} "
                "GROUP BY country ORDER BY total DESC",
                "SELECT country, SUM(credit_limit) AS total FROM customers GROUP BY country "
                f"HAVING total > {threshold} ORDER BY total",
                f"SELECT country, COUNT(credit_limit) AS total FROM customers GROUP BY country "
                f"HAVING SUM(credit_limit) > {threshold} ORDER BY SUM(credit_limit) DESC",
            ],
        )


# ----------------------------------------------------------------------------- nested queries


@_family("never_ordered_in_category", "nested")
def _never_ordered(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for cat in p.values("SELECT DISTINCT category FROM products"):
        yield (
            f"Which products in the {cat} category have never been ordered? List their names alphabetically.",
            f"SELECT name FROM products WHERE category = {_lit(cat)} "
            "AND id NOT IN (SELECT product_id FROM order_items) ORDER BY name",
            [
                f"SELECT name FROM products WHERE category = {_lit(cat)} "
                "AND id IN (SELECT product_id FROM order_items) ORDER BY name",
                f"SELECT name FROM products WHERE category = {_lit(cat)} "
                "AND id NOT IN (SELECT id FROM orders) ORDER BY name",
                f"SELECT name FROM products WHERE category = {_lit(cat)} AND discontinued = 1 ORDER BY name",
            ],
        )


@_family("above_department_average", "nested")
def _above_department_average(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for dept in p.values("SELECT name FROM departments WHERE head_id IS NOT NULL"):
        base = (
            "SELECT e.first_name, e.last_name FROM employees e JOIN departments d ON d.id = e.department_id "
            f"WHERE d.name = {_lit(dept)} AND e.end_date IS NULL AND e.salary > "
        )
        own = (
            "(SELECT AVG(e2.salary) FROM employees e2 WHERE e2.department_id = e.department_id AND e2.end_date IS NULL)"
        )
        yield (
            f"Which current employees of the {dept} department earn more than the average salary of the "
            "department's current employees? Give first and last names, ordered by last name, then first name.",
            f"{base}{own} ORDER BY e.last_name, e.first_name",
            [
                f"{base}AVG(e.salary) ORDER BY e.last_name, e.first_name",
                f"{base}{own} ORDER BY e.first_name, e.last_name",
                f"{base.replace('e.salary > ', 'e.salary < ')}{own} ORDER BY e.last_name, e.first_name",
            ],
        )


@_family("customers_without_orders", "nested")
def _customers_without_orders(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for country in p.values("SELECT DISTINCT country FROM customers"):
        base = f"SELECT COUNT(*) FROM customers WHERE country = {_lit(country)} AND id "
        yield (
            f"How many customers from {_the(country)} have never placed an order?",
            f"{base}NOT IN (SELECT customer_id FROM orders)",
            [
                f"{base}IN (SELECT customer_id FROM orders)",
                f"{base}NOT IN (SELECT id FROM orders)",
                f"{base}NOT IN (SELECT customer_id FROM orders WHERE status = 'Cancelled')",
            ],
        )


@_family("pricier_than_category_max", "nested")
def _pricier_than_category_max(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for cat in p.values("SELECT DISTINCT category FROM products"):
        yield (
            f"How many products have a higher list price than the most expensive product in the {cat} category?",
            "SELECT COUNT(*) FROM products WHERE unit_price > "
            f"(SELECT MAX(unit_price) FROM products WHERE category = {_lit(cat)})",
            [
                "SELECT COUNT(*) FROM products WHERE unit_price > "
                f"(SELECT AVG(unit_price) FROM products WHERE category = {_lit(cat)})",
                "SELECT COUNT(*) FROM products WHERE unit_price > "
                f"(SELECT MIN(unit_price) FROM products WHERE category = {_lit(cat)})",
                "SELECT COUNT(*) FROM products WHERE unit_price > "
                f"(SELECT MAX(unit_price) FROM products WHERE category = {_lit(cat.upper())})",
            ],
        )


@_family("large_orders_of_customer", "nested")
def _large_orders(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for name in p.values(
        "SELECT company_name FROM customers WHERE id IN "
        "(SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) BETWEEN 4 AND 20)"
    ):
        totals = (
            "WITH totals AS (SELECT o.id, SUM({rev}) AS total FROM orders o "
            "JOIN order_items oi ON oi.order_id = o.id JOIN customers c ON c.id = o.customer_id "
            f"WHERE c.company_name = {_lit(name)} GROUP BY o.id) "
        )
        gold = totals.format(rev=_REVENUE)
        yield (
            f"Which orders of {name} are worth more than that customer's average order? An order's worth is "
            "the sum of quantity × unit price × (1 − discount) over its items. Give the order ids, lowest first.",
            f"{gold}SELECT id FROM totals WHERE total > (SELECT AVG(total) FROM totals) ORDER BY id",
            [
                f"{gold.replace('c.company_name', 'c.name')}SELECT id FROM totals WHERE total > "
                "(SELECT AVG(total) FROM totals) ORDER BY id",
                f"{gold}SELECT id FROM totals WHERE total < (SELECT AVG(total) FROM totals) ORDER BY id",
                f"{gold}SELECT id FROM totals WHERE total > (SELECT AVG(total) FROM totals) ORDER BY total DESC",
            ],
        )


@_family("earns_more_than_manager", "nested")
def _earns_more_than_manager(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    heads = p.values("SELECT name FROM departments WHERE head_id IS NOT NULL")
    for dept, pct in ((d, pct) for d in heads for pct in p.choices((65, 70, 75))):
        base = (
            "SELECT e.first_name, e.last_name FROM employees e WHERE e.department_id = "
            f"(SELECT id FROM departments WHERE name = {_lit(dept)}) AND e.salary "
        )
        yield (
            f"Which employees of the {dept} department earn at least {pct}% of their own manager's salary? "
            "Give first and last names, ordered by last name.",
            f"{base}>= {pct / 100} * (SELECT m.salary FROM employees m WHERE m.id = e.manager_id) ORDER BY e.last_name",
            [
                f"{base}>= {pct / 100} * (SELECT m.salary FROM employees m WHERE m.id = e.id) ORDER BY e.last_name",
                f"{base}>= {pct / 100} * (SELECT MAX(salary) FROM employees) ORDER BY e.last_name",
                f"{base}>= {pct} * (SELECT m.salary FROM employees m WHERE m.id = e.manager_id) ORDER BY e.last_name",
            ],
        )


# ----------------------------------------------------------------------------- dates


@_family("orders_in_month", "date")
def _orders_in_month(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for ym in p.values("SELECT DISTINCT strftime('%Y-%m', order_date) FROM orders"):
        year, month = ym.split("-")
        yield (
            f"How many orders were placed in {_MONTHS[int(month) - 1]} {year}?",
            f"SELECT COUNT(*) FROM orders WHERE strftime('%Y-%m', order_date) = '{ym}'",
            [
                f"SELECT COUNT(*) FROM orders WHERE order_date BETWEEN '{ym}-01' AND '{ym}-30'",
                f"SELECT COUNT(*) FROM orders WHERE strftime('%m', order_date) = '{month}'",
                f"SELECT COUNT(*) FROM orders WHERE order_date LIKE '{year}-{int(month)}-%'",
            ],
        )


@_family("average_shipping_days", "date")
def _average_shipping_days(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for year, quarter in p.values(
        f"SELECT y, q FROM {p.years()}, (SELECT 1 q UNION SELECT 2 UNION SELECT 3 UNION SELECT 4)"
    ):
        start = f"{year}-{3 * quarter - 2:02d}-01"
        end = f"{year}-{3 * quarter + 1:02d}-01" if quarter < 4 else f"{int(year) + 1}-01-01"
        where = f"WHERE shipped_date IS NOT NULL AND order_date >= '{start}' AND order_date < '{end}'"
        yield (
            f"On average, how many days passed between order date and shipping date for the orders placed in the "
            f"{_ORDINAL[quarter - 1]} quarter of {year} that have shipped? Round to 1 decimal.",
            f"SELECT ROUND(AVG(julianday(shipped_date) - julianday(order_date)), 1) FROM orders {where}",
            [
                f"SELECT ROUND(AVG(shipped_date - order_date), 1) FROM orders {where}",
                f"SELECT ROUND(AVG(julianday(order_date) - julianday(shipped_date)), 1) FROM orders {where}",
                f"SELECT ROUND(AVG(julianday(shipped_date) - julianday(order_date)), 1) FROM orders "
                f"WHERE shipped_date >= '{start}' AND shipped_date < '{end}'",
            ],
        )


@_family("slow_shipments", "date")
def _slow_shipments(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for year, days in p.values(f"SELECT y, d FROM {p.years()}, (SELECT 5 d UNION SELECT 7 UNION SELECT 10)"):
        base = f"SELECT COUNT(*) FROM orders WHERE strftime('%Y', order_date) = '{year}' AND "
        yield (
            f"How many orders placed in {year} took more than {days} days to ship?",
            f"{base}julianday(shipped_date) - julianday(order_date) > {days}",
            [
                f"{base}julianday(shipped_date) - julianday(order_date) >= {days}",
                f"SELECT COUNT(*) FROM orders WHERE julianday(shipped_date) - julianday(order_date) > {days}",
                f"{base}shipped_date - order_date > {days}",
            ],
        )


@_family("hires_still_employed", "date")
def _hires_still_employed(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for year in p.values("SELECT DISTINCT strftime('%Y', hire_date) FROM employees"):
        base = f"SELECT COUNT(*) FROM employees WHERE strftime('%Y', hire_date) = '{year}'"
        yield (
            f"Of the employees hired in {year}, how many still work at the company?",
            f"{base} AND end_date IS NULL",
            [
                base,
                f"SELECT COUNT(*) FROM employees WHERE hire_date = '{year}' AND end_date IS NULL",
                f"SELECT COUNT(*) FROM employees WHERE hire_date >= '{year}' AND end_date IS NULL",
            ],
        )


@_family("busiest_month_or_weekday", "date")
def _busiest_period(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for year, unit in p.values(f"SELECT y, u FROM {p.years()}, (SELECT 'm' u UNION SELECT 'w')"):
        if unit == "m":
            question = f"In which month of {year} were the most orders placed? Answer with the month number (1-12)."
            expr = "CAST(strftime('%m', order_date) AS INTEGER)"
        else:
            question = (
                f"On which day of the week were the most orders placed in {year}? Answer with the weekday number, "
                "0 for Sunday up to 6 for Saturday."
            )
            expr = "CAST(strftime('%w', order_date) AS INTEGER)"
        base = f"SELECT {expr} AS period FROM orders WHERE strftime('%Y', order_date) = '{year}' GROUP BY period"
        yield (
            question,
            f"{base} ORDER BY COUNT(*) DESC LIMIT 1",
            [
                f"{base} ORDER BY COUNT(*) LIMIT 1",
                f"{base} ORDER BY period DESC LIMIT 1",
                f"SELECT {expr} AS period FROM orders GROUP BY period ORDER BY COUNT(*) DESC LIMIT 1",
            ],
        )


@_family("signups_in_quarter", "date")
def _signups_in_quarter(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for year, quarter in p.values(
        f"SELECT y, q FROM {p.years('customers', 'signup_date', skip=1)}, (SELECT 1 q UNION SELECT 2 UNION SELECT 3)"
    ):
        start = f"{year}-{3 * quarter - 2:02d}-01"
        end = f"{year}-{3 * quarter + 1:02d}-01"
        last_month = f"{year}-{3 * quarter:02d}"
        yield (
            f"How many customers signed up in the {_ORDINAL[quarter - 1]} quarter of {year}?",
            f"SELECT COUNT(*) FROM customers WHERE signup_date >= '{start}' AND signup_date < '{end}'",
            [
                f"SELECT COUNT(*) FROM customers WHERE signup_date BETWEEN '{start}' AND '{last_month}'",
                f"SELECT COUNT(*) FROM customers WHERE CAST(strftime('%m', signup_date) AS INTEGER) "
                f"BETWEEN {3 * quarter - 2} AND {3 * quarter}",
                f"SELECT COUNT(*) FROM customers WHERE signup_date LIKE '{year}-Q{quarter}%'",
            ],
        )


@_family("long_tenure", "date")
def _long_tenure(p: _Picker) -> Iterator[tuple[str, str, list[str]]]:
    for years in p.values("SELECT value FROM json_each('[2, 3, 4, 5, 6, 7, 8, 9, 10]')"):
        yield (
            f"How many current employees had been with the company for at least {years} full years on 2024-12-31?",
            "SELECT COUNT(*) FROM employees WHERE end_date IS NULL "
            f"AND hire_date <= date('2024-12-31', '-{years} years')",
            [
                "SELECT COUNT(*) FROM employees WHERE end_date IS NULL "
                f"AND DATEDIFF(year, hire_date, '2024-12-31') >= {years}",
                f"SELECT COUNT(*) FROM employees WHERE end_date IS NULL AND hire_date <= '{2024 - years}'",
                f"SELECT COUNT(*) FROM employees WHERE end_date IS NULL AND hire_date >= "
                f"date('2024-12-31', '-{years} years')",
                "SELECT COUNT(*) FROM employees WHERE end_date = NULL "
                f"AND hire_date <= date('2024-12-31', '-{years} years')",
            ],
        )


# ----------------------------------------------------------------------------- one-off questions


_ONE_OFFS: tuple[tuple[str, str, str, list[str]], ...] = (
    ("nested", "Which departments have no employees at all?",
     "SELECT name FROM departments WHERE id NOT IN "
     "(SELECT department_id FROM employees WHERE department_id IS NOT NULL)",
     ["SELECT name FROM departments WHERE id NOT IN (SELECT department_id FROM employees)",
      "SELECT name FROM departments WHERE head_id IS NOT NULL",
      "SELECT d.name FROM departments d LEFT JOIN employees e ON e.department_id = d.id WHERE e.id IS NOT NULL "
      "GROUP BY d.name"]),
    ("single_table", "How many employees are not assigned to any department?",
     "SELECT COUNT(*) FROM employees WHERE department_id IS NULL",
     ["SELECT COUNT(*) FROM employees WHERE department_id = NULL",
      "SELECT COUNT(department_id) FROM employees",
      "SELECT COUNT(*) FROM employees WHERE department IS NULL"]),
    ("single_table", "Which department has the largest budget? Give its name.",
     "SELECT name FROM departments ORDER BY budget DESC LIMIT 1",
     ["SELECT name FROM departments ORDER BY budget LIMIT 1",
      "SELECT MAX(budget) FROM departments",
      "SELECT name FROM departments ORDER BY department_budget DESC LIMIT 1",
      "SELECT name FROM departments WHERE budget = (SELECT MAX(budget) FROM departments WHERE location = 'new york')"]),
    ("date", "Which current employee has been with the company the longest? Give their first and last name.",
     "SELECT first_name, last_name FROM employees WHERE end_date IS NULL ORDER BY hire_date LIMIT 1",
     ["SELECT first_name, last_name FROM employees WHERE end_date IS NULL ORDER BY hire_date DESC LIMIT 1",
      "SELECT first_name, last_name FROM employees WHERE manager_id IS NULL",
      "SELECT first_name, last_name FROM employees ORDER BY start_date LIMIT 1",
      "SELECT first_name, last_name FROM employees WHERE end_date = NULL ORDER BY hire_date LIMIT 1"]),
    ("single_table", "How many orders that were not cancelled have not shipped yet?",
     "SELECT COUNT(*) FROM orders WHERE shipped_date IS NULL AND status <> 'Cancelled'",
     ["SELECT COUNT(*) FROM orders WHERE shipped_date IS NULL",
      "SELECT COUNT(*) FROM orders WHERE status = 'Shipped'",
      "SELECT COUNT(*) FROM orders WHERE shipped = 0",
      "SELECT COUNT(*) FROM orders WHERE shipped_date = NULL AND status <> 'Cancelled'"]),
    ("join", "Which customer placed the very first order in the database (the earliest order date, then the "
     "lowest order id)? Give the company name.",
     "SELECT c.company_name FROM orders o JOIN customers c ON c.id = o.customer_id "
     "ORDER BY o.order_date, o.id LIMIT 1",
     ["SELECT c.company_name FROM customers c ORDER BY c.signup_date LIMIT 1",
      "SELECT c.company_name FROM orders o JOIN customers c ON c.id = o.customer_id ORDER BY o.order_date DESC, "
      "o.id LIMIT 1",
      "SELECT c.company_name FROM orders o JOIN customers c ON c.id = o.customer ORDER BY o.order_date LIMIT 1",
      "SELECT c.company_name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.order_date = "
      "(SELECT MIN(order_date) FROM orders WHERE status = 'delivered')"]),
    ("aggregate", "On average, how many different products does an order contain? Round to 2 decimals.",
     "SELECT ROUND(COUNT(*) * 1.0 / (SELECT COUNT(*) FROM orders), 2) FROM order_items",
     ["SELECT ROUND(AVG(quantity), 2) FROM order_items",
      "SELECT COUNT(*) / (SELECT COUNT(*) FROM orders) FROM order_items",
      "SELECT ROUND(AVG(items), 2) FROM orders",
      "SELECT ROUND(COUNT(*) * 1.0 / (SELECT COUNT(*) FROM orders), 2) FROM order_items WHERE discount = NULL"]),
    ("single_table", "How many customers have no account manager?",
     "SELECT COUNT(*) FROM customers WHERE account_manager_id IS NULL",
     ["SELECT COUNT(*) FROM customers WHERE account_manager_id = NULL",
      "SELECT COUNT(account_manager_id) FROM customers",
      "SELECT COUNT(*) FROM customers WHERE manager_id IS NULL"]),
    ("aggregate", "What percentage of the orders placed in 2024 were cancelled? Round to 1 decimal.",
     "SELECT ROUND(100.0 * SUM(status = 'Cancelled') / COUNT(*), 1) FROM orders WHERE order_date LIKE '2024-%'",
     ["SELECT ROUND(100 * SUM(status = 'Cancelled') / COUNT(*), 1) FROM orders WHERE order_date LIKE '2024-%'",
      "SELECT ROUND(100.0 * SUM(status = 'cancelled') / COUNT(*), 1) FROM orders WHERE order_date LIKE '2024-%'",
      "SELECT ROUND(100.0 * SUM(status = 'Cancelled') / COUNT(*), 1) FROM orders"]),
    ("aggregate", "Which country's customers brought in the least revenue on orders placed in 2023, excluding "
     "cancelled orders? Revenue is quantity × unit price charged × (1 − discount). Give the country.",
     "SELECT c.country FROM orders o JOIN order_items oi ON oi.order_id = o.id JOIN customers c "
     "ON c.id = o.customer_id WHERE o.order_date LIKE '2023-%' AND o.status <> 'Cancelled' "
     f"GROUP BY c.country ORDER BY SUM({_REVENUE}) LIMIT 1",
     ["SELECT country FROM customers GROUP BY country ORDER BY COUNT(*) LIMIT 1",
      "SELECT c.country FROM orders o JOIN order_items oi ON oi.order_id = o.id JOIN customers c "
      "ON c.id = o.customer_id WHERE o.order_date LIKE '2023-%' AND o.status <> 'Cancelled' "
      f"GROUP BY c.country ORDER BY SUM({_REVENUE}) DESC LIMIT 1",
      "SELECT country FROM customers GROUP BY country ORDER BY SUM(revenue) LIMIT 1",
      "SELECT c.country FROM orders o JOIN order_items oi ON oi.order_id = o.id JOIN customers c "
      "ON c.id = o.customer_id WHERE o.order_date LIKE '2023/%' AND o.status <> 'Cancelled' "
      f"GROUP BY c.country ORDER BY SUM({_REVENUE}) LIMIT 1"]),
    ("nested", "Which sales staff who are still employed handled no orders at all in 2024? Give first and last "
     "names, ordered by last name.",
     "SELECT first_name, last_name FROM employees WHERE department_id = (SELECT id FROM departments "
     "WHERE name = 'Sales') AND end_date IS NULL AND id NOT IN (SELECT employee_id FROM orders "
     "WHERE order_date LIKE '2024-%' AND employee_id IS NOT NULL) ORDER BY last_name",
     ["SELECT first_name, last_name FROM employees WHERE department_id = (SELECT id FROM departments "
      "WHERE name = 'Sales') AND end_date IS NULL AND id NOT IN (SELECT employee_id FROM orders "
      "WHERE order_date LIKE '2024-%') ORDER BY last_name",
      "SELECT first_name, last_name FROM employees WHERE department_id = (SELECT id FROM departments "
      "WHERE name = 'Sales') AND id NOT IN (SELECT employee_id FROM orders WHERE order_date LIKE '2024-%' "
      "AND employee_id IS NOT NULL) ORDER BY last_name",
      "SELECT first_name, last_name FROM employees WHERE department_id = (SELECT id FROM departments "
      "WHERE name = 'Sales') AND end_date IS NULL AND id IN (SELECT employee_id FROM orders "
      "WHERE order_date LIKE '2024-%') ORDER BY last_name"]),
    ("join", "In which city is the department that employs the most current staff located?",
     "SELECT d.location FROM departments d JOIN employees e ON e.department_id = d.id WHERE e.end_date IS NULL "
     "GROUP BY d.id ORDER BY COUNT(*) DESC LIMIT 1",
     ["SELECT d.location FROM departments d ORDER BY d.budget LIMIT 1",
      "SELECT d.location FROM departments d JOIN employees e ON e.department_id = d.id WHERE e.end_date IS NULL "
      "GROUP BY d.id ORDER BY COUNT(*) LIMIT 1",
      "SELECT d.city FROM departments d JOIN employees e ON e.department_id = d.id GROUP BY d.id "
      "ORDER BY COUNT(*) DESC LIMIT 1",
      "SELECT d.location FROM departments d JOIN employees e ON e.department_id = d.id WHERE e.end_date = NULL "
      "GROUP BY d.id ORDER BY COUNT(*) DESC LIMIT 1"]),
)  # fmt: skip

INSTANCES_PER_FAMILY = 5
MAX_ANSWER_ROWS = 25


# Column names someone who has not described the tables might guess: a schema-linking slip.
_MISNAMED = {
    "company_name": "customer_name", "first_name": "firstname", "last_name": "surname", "order_date": "date_ordered",
    "unit_price": "price", "category": "category_name", "country": "country_name", "status": "order_status",
    "salary": "annual_salary", "hire_date": "start_date", "end_date": "termination_date", "quantity": "qty",
    "shipped_date": "ship_date", "signup_date": "created_at", "credit_limit": "credit", "department_id": "dept_id",
    "customer_id": "client_id", "discontinued": "is_discontinued", "email": "email_address", "job_title": "title",
    "location": "city_name", "budget": "annual_budget", "head_id": "manager_id", "manager_id": "boss_id",
    "employee_id": "rep_id", "product_id": "item_id", "order_id": "purchase_id", "name": "title",
}  # fmt: skip


def _schema_slip(gold: str) -> str | None:
    """``gold`` with its first known column name (outside string literals) replaced by a plausible wrong guess."""
    parts = re.split(r"('(?:[^']|'')*')", gold)
    for i in range(0, len(parts), 2):
        m = re.search(r"\b(" + "|".join(sorted(_MISNAMED, key=len, reverse=True)) + r")\b", parts[i])
        if m:
            parts[i] = parts[i][: m.start()] + _MISNAMED[m.group(1)] + parts[i][m.end() :]
            return "".join(parts)
    return None


def _value_slip(gold: str) -> str | None:
    """``gold`` with the case of its first alphabetic string literal changed: a value-matching slip."""
    for m in re.finditer(r"'((?:[^']|'')*)'", gold):
        text = m.group(1)
        changed = text.lower() if text != text.lower() else text.upper()
        if changed != text:
            return gold[: m.start()] + "'" + changed + "'" + gold[m.end() :]
    return None


def build_tasks(
    database: str | Path,
    seed: int = 0,
    instances: int = INSTANCES_PER_FAMILY,
    *,
    exclude: LeakCheck | None = None,
    one_offs: bool = True,
    spread: bool = False,
) -> list[SQLTask]:
    """The question set over ``database``: up to ``instances`` checked instances of each family and the one-off
    questions, split alternately (train, test, train, …), in a fixed order. An instance that ``exclude`` finds to
    be one of its test tasks (:meth:`LeakCheck.reason`) is never emitted; ``one_offs=False`` leaves the fixed
    one-off questions out; ``spread=True`` crosses each value of a family's main slot with every value of its
    secondary one (:meth:`_Picker.choices`) instead of one drawn at random.

    Each task gets three distractors, one of each kind of mistake: a logic slip that returns a wrong
    non-empty result, a value slip that returns nothing (no rows, or only 0/NULL: a wrong literal, a
    case mismatch, ``= NULL``), and a schema slip that fails (a guessed column or table name). They
    come from the family's own wrong queries, or else from :func:`_value_slip` / :func:`_schema_slip`
    applied to the gold query; an instance that lacks one kind is dropped.
    """
    from agentgym.envs.sql.safety import ReadOnlySQLite

    rng = random.Random(seed)
    db = ReadOnlySQLite(database)
    conn = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True)
    picker = _Picker(conn, rng, spread)
    seen_questions: set[str] = set()

    def checked(question: str, gold: str, wrong: list[str]) -> list[str] | None:
        if question in seen_questions or (exclude is not None and exclude.reason(question, gold) is not None):
            return None
        return _distractors(db, conn, gold, wrong)

    tasks: list[SQLTask] = []
    try:
        for name, difficulty, family in _FAMILIES:
            accepted = []
            for question, gold, wrong in family(picker):
                distractors = checked(question, gold, wrong)
                if distractors is not None:
                    accepted.append((question, gold, distractors))
                    seen_questions.add(question)
                if len(accepted) == instances:
                    break
            for k, (question, gold, distractors) in enumerate(accepted):
                split = "test" if k % 2 == 1 else "train"  # v0's 5 instances: 3 train, 2 test
                tasks.append(_task(f"{name}-{k + 1}", question, gold, difficulty, split, distractors, name))
        for k, (difficulty, question, gold, wrong) in enumerate(_ONE_OFFS if one_offs else ()):
            distractors = checked(question, gold, wrong)
            if distractors is None:
                raise ValueError(f"one-off question {question!r} does not check out against {database}")
            split = "train" if k % 2 == 0 else "test"
            tasks.append(_task(f"one_off-{k + 1}", question, gold, difficulty, split, distractors, "one_off"))
    finally:
        conn.close()
        db.close()
    return tasks


def _distractors(db: Any, conn: sqlite3.Connection, gold: str, wrong: list[str]) -> list[str] | None:
    """The (logic, value, schema) distractors of an instance whose gold query checks out on ``db`` (a bounded,
    determined, non-empty result), else None. ``wrong`` are the family's own wrong queries, tried first."""
    from agentgym.envs.sql.env import looks_empty, results_match
    from agentgym.envs.sql.safety import QueryError

    result = db.query(gold, max_rows=MAX_ANSWER_ROWS + 1)
    if not result.rows or result.total_rows > MAX_ANSWER_ROWS or looks_empty(result):
        return None
    ordered = has_top_level_order_by(gold)
    if ordered and result.total_rows > 1 and not _order_is_determined(conn, gold, result.rows):
        return None
    kinds: dict[str, str] = {}
    for query in [*wrong, _value_slip(gold), _schema_slip(gold)]:
        if query is None:
            continue
        try:
            other = db.query(query, max_rows=10_000)
        except QueryError:
            kinds.setdefault("schema", query)
            continue
        if results_match(other.rows, result.rows, ordered):
            if query in wrong:
                return None  # a "wrong" query that is right: the family is broken for this value
            continue
        kinds.setdefault("value" if looks_empty(other) else "logic", query)
    if len(kinds) < 3:
        return None
    return [kinds["logic"], kinds["value"], kinds["schema"]]


def _task(id_: str, question: str, gold: str, difficulty: str, split: str, wrong: list[str], family: str) -> SQLTask:
    return SQLTask(
        id=id_,
        question=question,
        gold_sql=gold,
        difficulty=difficulty,
        split=split,
        ordered=has_top_level_order_by(gold),
        distractors=tuple(wrong),
        family=family,
    )


def _order_is_determined(conn: sqlite3.Connection, gold: str, rows: tuple[tuple[Any, ...], ...]) -> bool:
    """Whether an ordered gold result leaves nothing to chance: no ties in its ``ORDER BY`` keys that
    would let a correct query list (or, with ``LIMIT``, pick) different rows.

    The query is run twice with every output column appended to its ``ORDER BY`` as a tie-breaker,
    ascending and then descending; tied rows that differ come out in opposite orders.
    """
    limit = re.search(r"\s+LIMIT\s+\d+\s*$", gold, re.I)
    text, tail = (gold[: limit.start()], limit.group()) if limit else (gold, "")
    head, _, keys = text.rpartition("ORDER BY")
    n_columns = len(conn.execute(gold).description)
    runs = [
        conn.execute(
            f"{head}ORDER BY {keys}, {', '.join(f'{i} {way}' for i in range(1, n_columns + 1))}{tail}"
        ).fetchall()
        for way in ("ASC", "DESC")
    ]
    return runs[0] == runs[1] == list(rows)


def build_tasks_v1(database: str | Path = DATABASE_V0) -> list[SQLTask]:
    """SQLLookup-v1's questions: :func:`build_tasks` on the v0 database with :data:`V1_SEED` and up to
    :data:`V1_INSTANCES` instances a family (alternately train and test, as in v0). ``ValueError`` if a test
    train task is a test task (:class:`LeakCheck`), other than the one in :data:`V1_KNOWN_LEAKS`."""
    tasks = build_tasks(database, V1_SEED, V1_INSTANCES)
    with LeakCheck([t for t in tasks if t.split == "test"], [database, TRAINING_DATABASE]) as leaks:
        leaked = [
            t.id
            for t in tasks
            if t.split == "train" and t.id not in V1_KNOWN_LEAKS and leaks.reason(t.question, t.gold_sql) is not None
        ]
    if leaked:
        raise ValueError(f"train questions that are test questions: {leaked}")
    return tasks


V1_KNOWN_LEAKS = frozenset({"employees_by_initial-3"})
"""v1's train tasks that are v1 test tasks by SQLite's rules, found after v1 was frozen (issue 43): its ``LIKE 'd%'``
is the test task ``employees_by_initial-8``'s ``LIKE 'D%'`` (and v0's test ``employees_by_initial-4``). Kept, so that
v1 stays the set every recorded figure was measured on; :func:`build_tasks_v1` refuses any other."""


def test_tasks() -> list[SQLTask]:
    """Every task of the frozen test splits (v0 and v1): what training data must never hold."""
    return [t for path in (TASKS_V0, TASKS_V1) for t in load_tasks(path) if t.split == "test"]


def test_leak_check() -> LeakCheck:
    """The :class:`~agentgym.envs.sql.leaks.LeakCheck` of the frozen test splits, deciding near-duplicates on the
    v0 and the training database (close it, or use it in a ``with``)."""
    return LeakCheck(test_tasks(), [DATABASE_V0, TRAINING_DATABASE])


def build_training_tasks(
    instances: int = TRAINING_INSTANCES, seed: int = TRAINING_SEED, database: str | Path = DATABASE_V0
) -> list[SQLTask]:
    """Fresh training questions for SFT and RL: up to ``instances`` new instances of every question family on
    ``database``, drawn with ``seed``, all in split ``"train"``, with their gold SQL and distractors.

    No task of a frozen test split (:func:`test_tasks`), as :class:`LeakCheck` judges it, is ever emitted, so a model
    trained on them is still tested on unseen questions. The one-off questions are left out (their train
    halves are in the shipped sets). Play them with
    ``gym.make("agentgym/SQLLookup-v1", tasks_path=PATH, split="train")`` after :func:`write_tasks`."""
    with test_leak_check() as leaks:
        tasks = build_tasks(database, seed, instances, exclude=leaks, one_offs=False)
    return [t.model_copy(update={"id": f"generated-{t.id}", "split": "train"}) for t in tasks]


TRAINING_SET_SEED = 3
TRAINING_SET_INSTANCES = 150
TRAINING_SET_MIN_PER_FAMILY = 40


def assert_no_test_leak(tasks: list[SQLTask]) -> None:
    """``ValueError`` naming the first task that is a task of a frozen test split (v0 or v1) by what it means to
    SQLite (:class:`~agentgym.envs.sql.leaks.LeakCheck`), and why."""
    with test_leak_check() as leaks:
        leaks.assert_none(tasks)


def build_training_set(
    out_dir: str | Path = DATA_DIR,
    *,
    seed: int = TRAINING_SET_SEED,
    instances: int = TRAINING_SET_INSTANCES,
    min_per_family: int = TRAINING_SET_MIN_PER_FAMILY,
) -> dict[str, str]:
    """Build SQLLookup's training set into ``out_dir``: a database from :data:`TRAINING_VOCABULARY` (v0's values and
    more: departments, job titles, countries, cities, product categories, names) and up to ``instances`` questions
    of every family on it, none a frozen test question or gold query (:func:`assert_no_test_leak` checks the whole
    set). A family with fewer than ``min_per_family`` questions has them listed again (ids ``…-r2``, ``…-r3``) up to
    that count, so a uniform draw over the file sees the small families (a date family has at most 12 values of
    its own, some of them test questions) as often as ~40 questions each. Returns the files' SHA-256 (the
    database's also as ``database_content``, which any SQLite version reproduces)."""
    out_dir = Path(out_dir)
    db_path, tasks_path = out_dir / TRAINING_DATABASE.name, out_dir / TRAINING_TASKS.name
    db_sha = build_database(db_path, seed, TRAINING_VOCABULARY)
    with LeakCheck(test_tasks(), [DATABASE_V0, db_path]) as leaks:
        tasks = build_tasks(db_path, seed, instances, exclude=leaks, one_offs=False, spread=True)
        leaks.assert_none(tasks)
    families: dict[str, list[SQLTask]] = {}
    for task in tasks:
        families.setdefault(task.family or "", []).append(task)
    listed: list[SQLTask] = []
    for family in families.values():
        copies = [
            t if k < len(family) else t.model_copy(update={"id": f"{t.id}-r{k // len(family) + 1}"})
            for k in range(max(len(family), min_per_family))
            for t in [family[k % len(family)]]
        ]
        listed += [t.model_copy(update={"id": f"training-{t.id}", "split": "train"}) for t in copies]
    return {
        "database": db_sha,
        "database_content": content_sha256(db_path),
        "tasks": write_tasks(listed, tasks_path),
    }


def build(out_dir: str | Path = DATA_DIR, seed: int = 0) -> dict[str, str]:
    """Build the database and the tasks into ``out_dir``; return their checksums."""
    out_dir = Path(out_dir)
    db_path, tasks_path = out_dir / DATABASE_V0.name, out_dir / TASKS_V0.name
    db_sha = build_database(db_path, seed)
    tasks_sha = write_tasks(build_tasks(db_path, seed), tasks_path)
    return {"database": db_sha, "database_content": content_sha256(db_path), "tasks": tasks_sha}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Rebuild SQLLookup's database and question set from their seed.")
    parser.add_argument("--out", default=str(DATA_DIR), help="folder for company_v0.sqlite and sql_tasks_v0.jsonl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--v1", action="store_true", help="write sql_tasks_v1.jsonl (on the shipped v0 database)")
    parser.add_argument(
        "--training", metavar="PATH", help="write fresh training questions (no test question or gold SQL) to PATH"
    )
    parser.add_argument(
        "--training-set",
        action="store_true",
        help="write the training set (company_training.sqlite, sql_tasks_training.jsonl) into --out",
    )
    args = parser.parse_args()
    if args.training_set:
        sums = build_training_set(args.out)
        expected = {"database": TRAINING_DATABASE_SHA256, "tasks": TRAINING_TASKS_SHA256}
        for key, value in sums.items():
            verdict = "" if key not in expected else "  (matches)" if value == expected[key] else "  (differs)"
            print(f"{key:17s} {value}{verdict}")
        raise SystemExit(0)
    if args.training:
        generated = build_training_tasks()
        checksum = write_tasks(generated, args.training)
        print(f"{len(generated)} training questions → {args.training} (sha256 {checksum})")
        raise SystemExit(0)
    if args.v1:
        checksum = write_tasks(build_tasks_v1(), Path(args.out) / TASKS_V1.name)
        print(f"tasks_v1 {checksum}  ({'matches v1' if checksum == TASKS_V1_SHA256 else 'differs from v1'})")
        raise SystemExit(0)
    sums = build(args.out, args.seed)
    expected = {
        "database": DATABASE_V0_SHA256,
        "database_content": DATABASE_V0_CONTENT_SHA256,
        "tasks": TASKS_V0_SHA256,
    }
    for key, value in sums.items():
        verdict = "matches v0" if value == expected[key] else "differs from v0"
        print(f"{key:17s} {value}  ({verdict})")
    if sums["database"] != DATABASE_V0_SHA256 and sqlite3.sqlite_version != BUILT_WITH_SQLITE:
        print(f"note: v0 was written by SQLite {BUILT_WITH_SQLITE}, this is {sqlite3.sqlite_version}; "
              "compare database_content")  # fmt: skip
