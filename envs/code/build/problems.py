"""CodeSandbox-v0's problems, written for agentgym: the source of ``data/code_tasks_v0.jsonl``.

Each problem has a prompt that states every rule the hidden tests check, a signature, 2 visible tests and 6
hidden ones (``call == expected``, the expected value a Python literal), a reference solution and two plausible
wrong solutions, in this order:

1. a **visible slip**: wrong on at least one visible test (running the tests reveals it);
2. an **edge slip**: right on every visible test (an edge case the prompt states but the visible tests do not
   show).

Both fail at least one hidden test.

:func:`agentgym.envs.code.dataset.build_tasks` checks all of that and assigns the train/test split. Edit here, then
rebuild with ``python -m agentgym.envs.code.dataset`` (which makes a new version: v0 is frozen).
"""

from __future__ import annotations

import textwrap
from typing import Any


def P(
    id: str,
    topic: str,
    difficulty: str,
    prompt: str,
    signature: str,
    visible: list[str],
    hidden: list[str],
    solution: str,
    wrong: list[str],
) -> dict[str, Any]:
    def code(text: str) -> str:
        return textwrap.dedent(text).strip() + "\n"

    return {
        "id": id,
        "topic": topic,
        "difficulty": difficulty,
        "prompt": " ".join(prompt.split()),
        "signature": signature,
        "visible_tests": visible,
        "hidden_tests": hidden,
        "solution": code(solution),
        "wrong_solutions": [code(w) for w in wrong],
    }


PROBLEMS = [
    # ================================================================== strings
    P(
        "rle_encode", "strings", "easy",
        """Run-length encode a string: each run of equal characters becomes the character followed by the run's
        length, e.g. "aaabcc" becomes "a3b1c2". Runs may be longer than 9. The empty string encodes to "".""",
        "def rle_encode(s: str) -> str",
        ["rle_encode('aaabcc') == 'a3b1c2'", "rle_encode('z') == 'z1'"],
        [
            "rle_encode('') == ''",
            "rle_encode('aaaaaaaaaaaa') == 'a12'",
            "rle_encode('abab') == 'a1b1a1b1'",
            "rle_encode('aAa') == 'a1A1a1'",
            "rle_encode('  x') == ' 2x1'",
            "rle_encode('xxxxxxxxxxy') == 'x10y1'",
        ],
        """
        def rle_encode(s: str) -> str:
            out = []
            i = 0
            while i < len(s):
                j = i
                while j < len(s) and s[j] == s[i]:
                    j += 1
                out.append(f"{s[i]}{j - i}")
                i = j
            return "".join(out)
        """,
        [
            """
            def rle_encode(s: str) -> str:
                out = []
                i = 0
                while i < len(s):
                    j = i
                    while j < len(s) and s[j] == s[i]:
                        j += 1
                    out.append(f"{j - i}{s[i]}")
                    i = j
                return "".join(out)
            """,
            """
            def rle_encode(s: str) -> str:
                out = []
                prev, count = s[0], 0
                for c in s:
                    if c == prev:
                        count += 1
                    else:
                        out.append(f"{prev}{count}")
                        prev, count = c, 1
                out.append(f"{prev}{count}")
                return "".join(out)
            """,
        ],
    ),
    P(
        "is_palindrome", "strings", "easy",
        """Whether a text reads the same backwards, ignoring case and every character that is not a letter or a
        digit. The empty string is a palindrome.""",
        "def is_palindrome(text: str) -> bool",
        ["is_palindrome('A man, a plan, a canal: Panama') == True", "is_palindrome('hello') == False"],
        [
            "is_palindrome('') == True",
            "is_palindrome(\"No 'x' in Nixon\") == True",
            "is_palindrome('0P') == False",
            "is_palindrome('ab') == False",
            "is_palindrome('Was it a car or a cat I saw?') == True",
            "is_palindrome('12 3 21') == True",
        ],
        """
        def is_palindrome(text: str) -> bool:
            kept = [c.lower() for c in text if c.isalnum()]
            return kept == kept[::-1]
        """,
        [
            """
            def is_palindrome(text: str) -> bool:
                return text == text[::-1]
            """,
            """
            def is_palindrome(text: str) -> bool:
                kept = [c.lower() for c in text if c.isalpha()]
                return kept == kept[::-1]
            """,
        ],
    ),
    P(
        "caesar_shift", "strings", "easy",
        """Shift every ASCII letter of a text by k places in the alphabet, wrapping around from z to a, keeping
        its case; other characters stay as they are. k may be negative or larger than 26.""",
        "def caesar_shift(text: str, k: int) -> str",
        ["caesar_shift('abc', 1) == 'bcd'", "caesar_shift('Hello, World!', 3) == 'Khoor, Zruog!'"],
        [
            "caesar_shift('xyz', 3) == 'abc'",
            "caesar_shift('abc', -1) == 'zab'",
            "caesar_shift('Zebra', 52) == 'Zebra'",
            "caesar_shift('', 5) == ''",
            "caesar_shift('a-b', 27) == 'b-c'",
            "caesar_shift('ABC', -27) == 'ZAB'",
        ],
        """
        def caesar_shift(text: str, k: int) -> str:
            out = []
            for c in text:
                if "a" <= c <= "z" or "A" <= c <= "Z":
                    base = ord("a") if c.islower() else ord("A")
                    out.append(chr((ord(c) - base + k) % 26 + base))
                else:
                    out.append(c)
            return "".join(out)
        """,
        [
            """
            def caesar_shift(text: str, k: int) -> str:
                out = []
                for c in text.lower():
                    if "a" <= c <= "z":
                        out.append(chr((ord(c) - ord("a") + k) % 26 + ord("a")))
                    else:
                        out.append(c)
                return "".join(out)
            """,
            """
            def caesar_shift(text: str, k: int) -> str:
                out = []
                for c in text:
                    if "a" <= c <= "z" or "A" <= c <= "Z":
                        last = "z" if c.islower() else "Z"
                        n = ord(c) + k
                        if n > ord(last):
                            n -= 26
                        out.append(chr(n))
                    else:
                        out.append(c)
                return "".join(out)
            """,
        ],
    ),
    P(
        "title_case", "strings", "easy",
        """Capitalise each word of a text: its first character upper case, the rest lower case. Words are
        separated by single spaces; keep every space where it is (several spaces in a row stay), and treat
        everything between spaces as one word (so "it's" becomes "It's").""",
        "def title_case(text: str) -> str",
        ["title_case('hello world') == 'Hello World'", "title_case('PYTHON is FUN') == 'Python Is Fun'"],
        [
            "title_case('') == ''",
            "title_case('  two  spaces ') == '  Two  Spaces '",
            "title_case(\"it's\") == \"It's\"",
            "title_case('a') == 'A'",
            "title_case('x1y z') == 'X1y Z'",
            "title_case('mIxEd CaSe') == 'Mixed Case'",
        ],
        """
        def title_case(text: str) -> str:
            return " ".join(w[:1].upper() + w[1:].lower() for w in text.split(" "))
        """,
        [
            """
            def title_case(text: str) -> str:
                return " ".join(w[0].upper() + w[1:] for w in text.split(" "))
            """,
            """
            def title_case(text: str) -> str:
                return text.title()
            """,
        ],
    ),
    P(
        "longest_common_prefix", "strings", "easy",
        """The longest string that every word in the list starts with; "" for an empty list or when the words
        share no prefix.""",
        "def longest_common_prefix(words: list[str]) -> str",
        [
            "longest_common_prefix(['flower', 'flow', 'flight']) == 'fl'",
            "longest_common_prefix(['dog', 'racecar', 'car']) == ''",
        ],
        [
            "longest_common_prefix([]) == ''",
            "longest_common_prefix(['a']) == 'a'",
            "longest_common_prefix(['abc', 'abc']) == 'abc'",
            "longest_common_prefix(['ab', 'a']) == 'a'",
            "longest_common_prefix(['', 'x']) == ''",
            "longest_common_prefix(['prepare', 'prefix', 'pro']) == 'pr'",
        ],
        """
        def longest_common_prefix(words: list[str]) -> str:
            if not words:
                return ""
            prefix = words[0]
            for w in words[1:]:
                while not w.startswith(prefix):
                    prefix = prefix[:-1]
            return prefix
        """,
        [
            """
            def longest_common_prefix(words: list[str]) -> str:
                if len(words) < 2:
                    return words[0] if words else ""
                a, b = words[0], words[1]
                n = 0
                while n < min(len(a), len(b)) and a[n] == b[n]:
                    n += 1
                return a[:n]
            """,
            """
            def longest_common_prefix(words: list[str]) -> str:
                prefix = words[0]
                for w in words[1:]:
                    while not w.startswith(prefix):
                        prefix = prefix[:-1]
                return prefix
            """,
        ],
    ),
    P(
        "count_vowels", "strings", "easy",
        """Count the vowels a, e, i, o, u in a text, in either case ("y" is not a vowel).""",
        "def count_vowels(text: str) -> int",
        ["count_vowels('Hello') == 2", "count_vowels('xyz') == 0"],
        [
            "count_vowels('AEIOU') == 5",
            "count_vowels('') == 0",
            "count_vowels('rhythm') == 0",
            "count_vowels('Queueing') == 5",
            "count_vowels('bcdfgA') == 1",
            "count_vowels('Óla') == 1",
        ],
        """
        def count_vowels(text: str) -> int:
            return sum(c in "aeiouAEIOU" for c in text)
        """,
        [
            """
            def count_vowels(text: str) -> int:
                return sum(c in "aeiouy" for c in text.lower())
            """,
            """
            def count_vowels(text: str) -> int:
                return sum(c in "aeiou" for c in text)
            """,
        ],
    ),
    P(
        "reverse_words", "strings", "easy",
        """Reverse the order of the words in a text. Words are separated by any run of whitespace; the result
        joins them with single spaces, without leading or trailing space.""",
        "def reverse_words(text: str) -> str",
        ["reverse_words('the sky is blue') == 'blue is sky the'", "reverse_words('hello') == 'hello'"],
        [
            "reverse_words('  hello world  ') == 'world hello'",
            "reverse_words('') == ''",
            "reverse_words('a  b   c') == 'c b a'",
            "reverse_words('one\\ttwo') == 'two one'",
            "reverse_words('   ') == ''",
            "reverse_words('x y') == 'y x'",
        ],
        """
        def reverse_words(text: str) -> str:
            return " ".join(reversed(text.split()))
        """,
        [
            """
            def reverse_words(text: str) -> str:
                return text[::-1]
            """,
            """
            def reverse_words(text: str) -> str:
                return " ".join(reversed(text.split(" ")))
            """,
        ],
    ),
    P(
        "are_anagrams", "strings", "easy",
        """Whether two phrases are anagrams of each other: the same letters the same number of times, ignoring
        spaces and case.""",
        "def are_anagrams(a: str, b: str) -> bool",
        ["are_anagrams('Dormitory', 'dirty room') == True", "are_anagrams('abc', 'abd') == False"],
        [
            "are_anagrams('', '') == True",
            "are_anagrams('a', 'aa') == False",
            "are_anagrams('Astronomer', 'Moon starer') == True",
            "are_anagrams('abc', 'cba ') == True",
            "are_anagrams('aab', 'abb') == False",
            "are_anagrams('Listen', 'Silent') == True",
        ],
        """
        def are_anagrams(a: str, b: str) -> bool:
            def letters(s):
                return sorted(c.lower() for c in s if c != " ")

            return letters(a) == letters(b)
        """,
        [
            """
            def are_anagrams(a: str, b: str) -> bool:
                return sorted(a) == sorted(b)
            """,
            """
            def are_anagrams(a: str, b: str) -> bool:
                return set(a.lower().replace(" ", "")) == set(b.lower().replace(" ", ""))
            """,
        ],
    ),
    P(
        "camel_to_snake", "strings", "medium",
        """Convert a camelCase or PascalCase name to snake_case: an upper-case letter that follows a lower-case
        letter or a digit starts a new word (insert "_" before it); then lower-case everything. Other characters
        are kept ("already_snake" stays as it is; "getUserID" becomes "get_user_id").""",
        "def camel_to_snake(name: str) -> str",
        ["camel_to_snake('camelCase') == 'camel_case'", "camel_to_snake('getUserID2') == 'get_user_id2'"],
        [
            "camel_to_snake('Simple') == 'simple'",
            "camel_to_snake('') == ''",
            "camel_to_snake('already_snake') == 'already_snake'",
            "camel_to_snake('version2Point0') == 'version2_point0'",
            "camel_to_snake('aB') == 'a_b'",
            "camel_to_snake('ABC') == 'abc'",
        ],
        """
        def camel_to_snake(name: str) -> str:
            out = []
            for i, c in enumerate(name):
                if c.isupper() and i > 0 and (name[i - 1].islower() or name[i - 1].isdigit()):
                    out.append("_")
                out.append(c.lower())
            return "".join(out)
        """,
        [
            """
            def camel_to_snake(name: str) -> str:
                out = []
                for i, c in enumerate(name):
                    if c.isupper() and i > 0:
                        out.append("_")
                    out.append(c.lower())
                return "".join(out)
            """,
            """
            def camel_to_snake(name: str) -> str:
                out = []
                for i, c in enumerate(name):
                    if c.isupper() and i > 0 and name[i - 1].islower():
                        out.append("_")
                    out.append(c.lower())
                return "".join(out)
            """,
        ],
    ),
    P(
        "mask_card", "strings", "medium",
        """Mask a card number for display: replace every digit with "*" except the last four digits; keep
        separators (spaces, dashes) where they are. A number with four digits or fewer is shown unchanged.""",
        "def mask_card(number: str) -> str",
        [
            "mask_card('1234567812345678') == '************5678'",
            "mask_card('1234-5678-9012-3456') == '****-****-****-3456'",
        ],
        [
            "mask_card('1234') == '1234'",
            "mask_card('12') == '12'",
            "mask_card('') == ''",
            "mask_card('12 34 56') == '** 34 56'",
            "mask_card('9-8-7-6-5') == '*-8-7-6-5'",
            "mask_card('12345') == '*2345'",
        ],
        """
        def mask_card(number: str) -> str:
            total = sum(c.isdigit() for c in number)
            seen = 0
            out = []
            for c in number:
                if c.isdigit():
                    seen += 1
                    out.append(c if seen > total - 4 else "*")
                else:
                    out.append(c)
            return "".join(out)
        """,
        [
            """
            def mask_card(number: str) -> str:
                return "*" * max(len(number) - 4, 0) + number[-4:]
            """,
            """
            def mask_card(number: str) -> str:
                head = "".join("*" if c.isdigit() else c for c in number[:-4])
                return head + number[-4:]
            """,
        ],
    ),
    P(
        "most_common_char", "strings", "medium",
        """The character that occurs most often in a text (spaces count too); on a tie, the one whose first
        occurrence comes first. "" for the empty string.""",
        "def most_common_char(text: str) -> str",
        ["most_common_char('banana') == 'a'", "most_common_char('abcabc') == 'a'"],
        [
            "most_common_char('xyzzy') == 'y'",
            "most_common_char('') == ''",
            "most_common_char('a') == 'a'",
            "most_common_char('bbaa') == 'b'",
            "most_common_char('aabbb') == 'b'",
            "most_common_char(' a ') == ' '",
        ],
        """
        def most_common_char(text: str) -> str:
            counts = {}
            for c in text:
                counts[c] = counts.get(c, 0) + 1
            return max(counts, key=counts.get) if counts else ""
        """,
        [
            """
            def most_common_char(text: str) -> str:
                best, n = "", 0
                for c in text:
                    k = text.count(c)
                    if k >= n:
                        best, n = c, k
                return best
            """,
            """
            def most_common_char(text: str) -> str:
                return max(sorted(text), key=text.count)
            """,
        ],
    ),
    # ================================================================== lists
    P(
        "second_largest", "lists", "easy",
        """The second largest distinct value in a list of numbers, or None when the list has fewer than two
        distinct values.""",
        "def second_largest(nums: list[int]) -> int | None",
        ["second_largest([3, 1, 4, 1, 5]) == 4", "second_largest([7]) == None"],
        [
            "second_largest([5, 5, 5]) == None",
            "second_largest([2, 2, 1]) == 1",
            "second_largest([-1, -2]) == -2",
            "second_largest([]) == None",
            "second_largest([1, 2, 3, 3]) == 2",
            "second_largest([10, 9, 10]) == 9",
        ],
        """
        def second_largest(nums: list[int]) -> int | None:
            distinct = sorted(set(nums))
            return distinct[-2] if len(distinct) >= 2 else None
        """,
        [
            """
            def second_largest(nums: list[int]) -> int | None:
                return sorted(nums)[-2]
            """,
            """
            def second_largest(nums: list[int]) -> int | None:
                ordered = sorted(nums)
                return ordered[-2] if len(ordered) >= 2 else None
            """,
        ],
    ),
    P(
        "chunk", "lists", "easy",
        """Split a list into consecutive chunks of n items (n ≥ 1); the last chunk holds what is left and may be
        shorter. An empty list gives no chunks.""",
        "def chunk(items: list, n: int) -> list[list]",
        ["chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]", "chunk([1, 2, 3], 3) == [[1, 2, 3]]"],
        [
            "chunk([], 3) == []",
            "chunk([1], 5) == [[1]]",
            "chunk([1, 2, 3, 4], 1) == [[1], [2], [3], [4]]",
            "chunk(list('abcdef'), 4) == [['a', 'b', 'c', 'd'], ['e', 'f']]",
            "chunk([0, 0], 2) == [[0, 0]]",
            "chunk([1, 2, 3, 4, 5, 6, 7], 3) == [[1, 2, 3], [4, 5, 6], [7]]",
        ],
        """
        def chunk(items: list, n: int) -> list[list]:
            return [items[i : i + n] for i in range(0, len(items), n)]
        """,
        [
            """
            def chunk(items: list, n: int) -> list[list]:
                return [items[i : i + n] for i in range(0, len(items) - n + 1, n)]
            """,
            """
            def chunk(items: list, n: int) -> list[list]:
                return [items[i : i + n] for i in range(0, len(items), n)] or [[]]
            """,
        ],
    ),
    P(
        "flatten", "lists", "medium",
        """Flatten a list that may contain lists nested to any depth into one flat list, keeping the order.
        Only lists are flattened: strings, tuples and other values are items.""",
        "def flatten(nested: list) -> list",
        ["flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]", "flatten([]) == []"],
        [
            "flatten([[[]]]) == []",
            "flatten([[1], [2], [3]]) == [1, 2, 3]",
            "flatten([1, [2, [3, [4, [5]]]]]) == [1, 2, 3, 4, 5]",
            "flatten(['ab', ['cd']]) == ['ab', 'cd']",
            "flatten([(1, 2), [3]]) == [(1, 2), 3]",
            "flatten([[None], 0]) == [None, 0]",
        ],
        """
        def flatten(nested: list) -> list:
            out = []
            for item in nested:
                if isinstance(item, list):
                    out.extend(flatten(item))
                else:
                    out.append(item)
            return out
        """,
        [
            """
            def flatten(nested: list) -> list:
                out = []
                for item in nested:
                    if isinstance(item, list):
                        out.extend(item)
                    else:
                        out.append(item)
                return out
            """,
            """
            def flatten(nested: list) -> list:
                out = []
                for item in nested:
                    if isinstance(item, (list, tuple)):
                        out.extend(flatten(list(item)))
                    else:
                        out.append(item)
                return out
            """,
        ],
    ),
    P(
        "rotate", "lists", "easy",
        """Rotate a list k places to the right (the last item moves to the front); a negative k rotates to the
        left, and k may be larger than the list. Return a new list.""",
        "def rotate(items: list, k: int) -> list",
        ["rotate([1, 2, 3, 4, 5], 2) == [4, 5, 1, 2, 3]", "rotate([1, 2, 3], 0) == [1, 2, 3]"],
        [
            "rotate([], 3) == []",
            "rotate([1, 2, 3], 4) == [3, 1, 2]",
            "rotate([1, 2, 3], -1) == [2, 3, 1]",
            "rotate([1], 100) == [1]",
            "rotate([1, 2], 2) == [1, 2]",
            "rotate(['a', 'b', 'c', 'd'], 7) == ['b', 'c', 'd', 'a']",
        ],
        """
        def rotate(items: list, k: int) -> list:
            if not items:
                return []
            k %= len(items)
            return items[-k:] + items[:-k]
        """,
        [
            """
            def rotate(items: list, k: int) -> list:
                return items[k:] + items[:k]
            """,
            """
            def rotate(items: list, k: int) -> list:
                return items[-k:] + items[:-k]
            """,
        ],
    ),
    P(
        "running_max", "lists", "easy",
        """The running maximum of a list of numbers: item i of the result is the largest of the first i + 1
        numbers.""",
        "def running_max(nums: list[int]) -> list[int]",
        ["running_max([1, 3, 2, 5, 4]) == [1, 3, 3, 5, 5]", "running_max([]) == []"],
        [
            "running_max([-1, -5, -2]) == [-1, -1, -1]",
            "running_max([2, 2, 2]) == [2, 2, 2]",
            "running_max([5, 4, 3]) == [5, 5, 5]",
            "running_max([0]) == [0]",
            "running_max([-3, 0, -1, 7]) == [-3, 0, 0, 7]",
            "running_max([-7]) == [-7]",
        ],
        """
        def running_max(nums: list[int]) -> list[int]:
            out = []
            for x in nums:
                out.append(x if not out or x > out[-1] else out[-1])
            return out
        """,
        [
            """
            def running_max(nums: list[int]) -> list[int]:
                out, total = [], 0
                for x in nums:
                    total += x
                    out.append(total)
                return out
            """,
            """
            def running_max(nums: list[int]) -> list[int]:
                out, best = [], 0
                for x in nums:
                    best = max(best, x)
                    out.append(best)
                return out
            """,
        ],
    ),
    P(
        "dedupe", "lists", "easy",
        """Remove duplicates from a list, keeping the first occurrence of each value, in the original order.""",
        "def dedupe(items: list) -> list",
        ["dedupe([1, 1, 2, 3, 3]) == [1, 2, 3]", "dedupe([3, 2, 2, 1]) == [3, 2, 1]"],
        [
            "dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]",
            "dedupe([]) == []",
            "dedupe(['b', 'a', 'b']) == ['b', 'a']",
            "dedupe([None, 0, None]) == [None, 0]",
            "dedupe([7]) == [7]",
            "dedupe([2, 1, 2, 1, 3]) == [2, 1, 3]",
        ],
        """
        def dedupe(items: list) -> list:
            return list(dict.fromkeys(items))
        """,
        [
            """
            def dedupe(items: list) -> list:
                return sorted(set(items))
            """,
            """
            def dedupe(items: list) -> list:
                return [x for i, x in enumerate(items) if i == 0 or items[i - 1] != x]
            """,
        ],
    ),
    P(
        "merge_sorted", "lists", "medium",
        """Merge two lists that are each sorted in ascending order into one sorted list, keeping every item
        (duplicates included).""",
        "def merge_sorted(a: list[int], b: list[int]) -> list[int]",
        ["merge_sorted([1, 3, 5], [2, 4, 6]) == [1, 2, 3, 4, 5, 6]", "merge_sorted([], [1]) == [1]"],
        [
            "merge_sorted([1, 1], [1]) == [1, 1, 1]",
            "merge_sorted([], []) == []",
            "merge_sorted([5], [1, 2, 3]) == [1, 2, 3, 5]",
            "merge_sorted([-2, 0], [-1]) == [-2, -1, 0]",
            "merge_sorted([1, 2, 3], [4, 5]) == [1, 2, 3, 4, 5]",
            "merge_sorted([2, 2], [2, 3]) == [2, 2, 2, 3]",
        ],
        """
        def merge_sorted(a: list[int], b: list[int]) -> list[int]:
            out, i, j = [], 0, 0
            while i < len(a) and j < len(b):
                if a[i] <= b[j]:
                    out.append(a[i])
                    i += 1
                else:
                    out.append(b[j])
                    j += 1
            return out + a[i:] + b[j:]
        """,
        [
            """
            def merge_sorted(a: list[int], b: list[int]) -> list[int]:
                out, i, j = [], 0, 0
                while i < len(a) and j < len(b):
                    if a[i] <= b[j]:
                        out.append(a[i])
                        i += 1
                    else:
                        out.append(b[j])
                        j += 1
                return out + a[i:]
            """,
            """
            def merge_sorted(a: list[int], b: list[int]) -> list[int]:
                return sorted(set(a) | set(b))
            """,
        ],
    ),
    P(
        "pairs_with_sum", "lists", "medium",
        """All distinct pairs of values (x, y) with x <= y and x + y == target, where x and y are items at two
        different positions of the list. Return them as a sorted list of tuples, each pair once.""",
        "def pairs_with_sum(nums: list[int], target: int) -> list[tuple[int, int]]",
        ["pairs_with_sum([1, 2, 3, 4, 5], 6) == [(1, 5), (2, 4)]", "pairs_with_sum([3, 3], 6) == [(3, 3)]"],
        [
            "pairs_with_sum([3], 6) == []",
            "pairs_with_sum([], 0) == []",
            "pairs_with_sum([1, 5, 1, 5], 6) == [(1, 5)]",
            "pairs_with_sum([0, 0, 0], 0) == [(0, 0)]",
            "pairs_with_sum([-1, 7, 3, 5, 2], 4) == [(-1, 5)]",
            "pairs_with_sum([2, 4, 3, 3], 6) == [(2, 4), (3, 3)]",
        ],
        """
        def pairs_with_sum(nums: list[int], target: int) -> list[tuple[int, int]]:
            seen, pairs = set(), set()
            for x in nums:
                y = target - x
                if y in seen:
                    pairs.add((min(x, y), max(x, y)))
                seen.add(x)
            return sorted(pairs)
        """,
        [
            """
            def pairs_with_sum(nums: list[int], target: int) -> list[tuple[int, int]]:
                pairs = set()
                for x in nums:
                    for y in nums:
                        if x + y == target and x <= y:
                            pairs.add((x, y))
                return sorted(pairs)
            """,
            """
            def pairs_with_sum(nums: list[int], target: int) -> list[tuple[int, int]]:
                out = []
                for i in range(len(nums)):
                    for j in range(i + 1, len(nums)):
                        if nums[i] + nums[j] == target:
                            out.append((min(nums[i], nums[j]), max(nums[i], nums[j])))
                return sorted(out)
            """,
        ],
    ),
    P(
        "moving_average", "lists", "easy",
        """The averages (floats) of every window of k consecutive numbers, in order; [] when the list is shorter
        than k (k ≥ 1).""",
        "def moving_average(nums: list[float], k: int) -> list[float]",
        [
            "moving_average([1, 2, 3, 4, 5], 2) == [1.5, 2.5, 3.5, 4.5]",
            "moving_average([2, 4, 6, 8], 3) == [4.0, 6.0]",
        ],
        [
            "moving_average([1, 2], 3) == []",
            "moving_average([5], 1) == [5.0]",
            "moving_average([1, 2, 2], 3) == [1.6666666666666667]",
            "moving_average([0, 10, 0, 10], 2) == [5.0, 5.0, 5.0]",
            "moving_average([1, 2, 3, 4], 4) == [2.5]",
            "moving_average([1, 1, 2], 2) == [1.0, 1.5]",
        ],
        """
        def moving_average(nums: list[float], k: int) -> list[float]:
            return [sum(nums[i : i + k]) / k for i in range(len(nums) - k + 1)]
        """,
        [
            """
            def moving_average(nums: list[float], k: int) -> list[float]:
                return [sum(nums[i : i + k]) // k for i in range(len(nums) - k + 1)]
            """,
            """
            def moving_average(nums: list[float], k: int) -> list[float]:
                return [round(sum(nums[i : i + k]) / k, 2) for i in range(len(nums) - k + 1)]
            """,
        ],
    ),
    P(
        "transpose", "lists", "easy",
        """Transpose a matrix given as a list of equal-length rows: row i of the result is column i of the input,
        as a list. The empty matrix transposes to [].""",
        "def transpose(matrix: list[list[int]]) -> list[list[int]]",
        ["transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]", "transpose([[1]]) == [[1]]"],
        [
            "transpose([]) == []",
            "transpose([[1, 2]]) == [[1], [2]]",
            "transpose([[1], [2]]) == [[1, 2]]",
            "transpose([[1, 2], [3, 4]]) == [[1, 3], [2, 4]]",
            "transpose([[0, 0, 0]]) == [[0], [0], [0]]",
            "transpose([[1, 2], [3, 4], [5, 6]]) == [[1, 3, 5], [2, 4, 6]]",
        ],
        """
        def transpose(matrix: list[list[int]]) -> list[list[int]]:
            return [list(column) for column in zip(*matrix)]
        """,
        [
            """
            def transpose(matrix: list[list[int]]) -> list[list[int]]:
                return list(zip(*matrix))
            """,
            """
            def transpose(matrix: list[list[int]]) -> list[list[int]]:
                return [[row[i] for row in matrix] for i in range(len(matrix[0]))]
            """,
        ],
    ),
    P(
        "interleave", "lists", "easy",
        """Interleave two lists: a[0], b[0], a[1], b[1], …; when one list runs out, the rest of the other follows
        in order.""",
        "def interleave(a: list, b: list) -> list",
        ["interleave([1, 2, 3], ['a', 'b', 'c']) == [1, 'a', 2, 'b', 3, 'c']", "interleave([], []) == []"],
        [
            "interleave([1], [2, 3, 4]) == [1, 2, 3, 4]",
            "interleave([1, 2, 3], []) == [1, 2, 3]",
            "interleave([], [9]) == [9]",
            "interleave([1, 3, 5, 7], [2, 4]) == [1, 2, 3, 4, 5, 7]",
            "interleave(['x'], ['y']) == ['x', 'y']",
            "interleave([None], [None, 0]) == [None, None, 0]",
        ],
        """
        def interleave(a: list, b: list) -> list:
            out = []
            for i in range(max(len(a), len(b))):
                if i < len(a):
                    out.append(a[i])
                if i < len(b):
                    out.append(b[i])
            return out
        """,
        [
            """
            def interleave(a: list, b: list) -> list:
                return a + b
            """,
            """
            def interleave(a: list, b: list) -> list:
                out = []
                for x, y in zip(a, b):
                    out += [x, y]
                return out
            """,
        ],
    ),
    # ================================================================== dicts
    P(
        "word_count", "dicts", "easy",
        """Count the words of a text: split on whitespace, strip the punctuation . , ! ? ; : from both ends of
        each word, lower-case it, and skip what is left empty. Return a dict word → count.""",
        "def word_count(text: str) -> dict[str, int]",
        ["word_count('the cat and the hat') == {'the': 2, 'cat': 1, 'and': 1, 'hat': 1}", "word_count('') == {}"],
        [
            "word_count('Hello, hello!') == {'hello': 2}",
            "word_count('A a A.') == {'a': 3}",
            "word_count('  spaced   out ') == {'spaced': 1, 'out': 1}",
            "word_count('... !!!') == {}",
            "word_count(\"it's it's\") == {\"it's\": 2}",
            "word_count('Yes? yes; YES:') == {'yes': 3}",
        ],
        """
        def word_count(text: str) -> dict[str, int]:
            counts = {}
            for raw in text.split():
                word = raw.strip(".,!?;:").lower()
                if word:
                    counts[word] = counts.get(word, 0) + 1
            return counts
        """,
        [
            """
            def word_count(text: str) -> dict[str, int]:
                counts = {}
                for word in text.split(" "):
                    counts[word] = counts.get(word, 0) + 1
                return counts
            """,
            """
            def word_count(text: str) -> dict[str, int]:
                counts = {}
                for word in text.lower().split():
                    counts[word] = counts.get(word, 0) + 1
                return counts
            """,
        ],
    ),
    P(
        "invert_dict", "dicts", "easy",
        """Invert a dict: map each value to the sorted list of the keys that had it.""",
        "def invert_dict(d: dict) -> dict",
        ["invert_dict({'a': 1, 'b': 2, 'c': 1}) == {1: ['a', 'c'], 2: ['b']}", "invert_dict({}) == {}"],
        [
            "invert_dict({'x': 'y'}) == {'y': ['x']}",
            "invert_dict({'b': 0, 'a': 0}) == {0: ['a', 'b']}",
            "invert_dict({1: 'a', 2: 'a', 3: 'b'}) == {'a': [1, 2], 'b': [3]}",
            "invert_dict({'k': None}) == {None: ['k']}",
            "invert_dict({'z': 1, 'y': 1, 'x': 2}) == {1: ['y', 'z'], 2: ['x']}",
            "invert_dict({3: 3, 1: 3, 2: 3}) == {3: [1, 2, 3]}",
        ],
        """
        def invert_dict(d: dict) -> dict:
            out = {}
            for key, value in d.items():
                out.setdefault(value, []).append(key)
            return {value: sorted(keys) for value, keys in out.items()}
        """,
        [
            """
            def invert_dict(d: dict) -> dict:
                return {value: key for key, value in d.items()}
            """,
            """
            def invert_dict(d: dict) -> dict:
                out = {}
                for key, value in d.items():
                    out.setdefault(value, []).append(key)
                return out
            """,
        ],
    ),
    P(
        "group_by_length", "dicts", "easy",
        """Group words by their length: a dict length → list of the words of that length, in their original
        order (repeated words appear repeatedly).""",
        "def group_by_length(words: list[str]) -> dict[int, list[str]]",
        ["group_by_length(['a', 'bb', 'cc', 'd']) == {1: ['a', 'd'], 2: ['bb', 'cc']}", "group_by_length([]) == {}"],
        [
            "group_by_length(['xyz']) == {3: ['xyz']}",
            "group_by_length(['', 'a', '']) == {0: ['', ''], 1: ['a']}",
            "group_by_length(['aa', 'aa']) == {2: ['aa', 'aa']}",
            "group_by_length(['dog', 'cat', 'mouse']) == {3: ['dog', 'cat'], 5: ['mouse']}",
            "group_by_length(['ab', 'a', 'abc', 'b']) == {2: ['ab'], 1: ['a', 'b'], 3: ['abc']}",
            "group_by_length(['q', 'q', 'r']) == {1: ['q', 'q', 'r']}",
        ],
        """
        def group_by_length(words: list[str]) -> dict[int, list[str]]:
            groups = {}
            for word in words:
                groups.setdefault(len(word), []).append(word)
            return groups
        """,
        [
            """
            def group_by_length(words: list[str]) -> dict[int, list[str]]:
                groups = {}
                for word in words:
                    groups.setdefault(len(word), set()).add(word)
                return groups
            """,
            """
            def group_by_length(words: list[str]) -> dict[int, list[str]]:
                groups = {}
                for word in words:
                    group = groups.setdefault(len(word), [])
                    if word not in group:
                        group.append(word)
                return groups
            """,
        ],
    ),
    P(
        "merge_counts", "dicts", "easy",
        """Add two dicts of counts: the result has every key of either dict, with the sum of its counts (a key
        missing from one dict counts 0 there). Keep keys whose sum is 0 or negative.""",
        "def merge_counts(a: dict, b: dict) -> dict",
        ["merge_counts({'x': 1, 'y': 2}, {'y': 3, 'z': 4}) == {'x': 1, 'y': 5, 'z': 4}", "merge_counts({}, {}) == {}"],
        [
            "merge_counts({'a': 1}, {}) == {'a': 1}",
            "merge_counts({}, {'b': 2}) == {'b': 2}",
            "merge_counts({'a': -1}, {'a': 1}) == {'a': 0}",
            "merge_counts({'a': 1, 'b': 1}, {'a': 1, 'b': 1}) == {'a': 2, 'b': 2}",
            "merge_counts({1: 5}, {2: 5}) == {1: 5, 2: 5}",
            "merge_counts({'n': -2}, {}) == {'n': -2}",
        ],
        """
        def merge_counts(a: dict, b: dict) -> dict:
            out = dict(a)
            for key, count in b.items():
                out[key] = out.get(key, 0) + count
            return out
        """,
        [
            """
            def merge_counts(a: dict, b: dict) -> dict:
                return {**a, **b}
            """,
            """
            from collections import Counter


            def merge_counts(a: dict, b: dict) -> dict:
                return dict(Counter(a) + Counter(b))
            """,
        ],
    ),
    P(
        "top_k_frequent", "dicts", "medium",
        """The k most frequent words of a list, most frequent first; words with the same count in alphabetical
        order. Fewer than k words if the list has fewer distinct words.""",
        "def top_k_frequent(words: list[str], k: int) -> list[str]",
        ["top_k_frequent(['b', 'a', 'b', 'c', 'a', 'b'], 2) == ['b', 'a']", "top_k_frequent(['x'], 1) == ['x']"],
        [
            "top_k_frequent(['a', 'b', 'c'], 2) == ['a', 'b']",
            "top_k_frequent([], 3) == []",
            "top_k_frequent(['z', 'z', 'y', 'y', 'x'], 2) == ['y', 'z']",
            "top_k_frequent(['q'], 5) == ['q']",
            "top_k_frequent(['b', 'b', 'a', 'a', 'c', 'c', 'c'], 3) == ['c', 'a', 'b']",
            "top_k_frequent(['m', 'n', 'm'], 1) == ['m']",
        ],
        """
        def top_k_frequent(words: list[str], k: int) -> list[str]:
            counts = {}
            for w in words:
                counts[w] = counts.get(w, 0) + 1
            return sorted(counts, key=lambda w: (-counts[w], w))[:k]
        """,
        [
            """
            def top_k_frequent(words: list[str], k: int) -> list[str]:
                counts = {}
                for w in words:
                    counts[w] = counts.get(w, 0) + 1
                return sorted(counts, key=lambda w: (counts[w], w))[:k]
            """,
            """
            from collections import Counter


            def top_k_frequent(words: list[str], k: int) -> list[str]:
                return [w for w, _ in Counter(words).most_common(k)]
            """,
        ],
    ),
    P(
        "nested_get", "dicts", "medium",
        """Look up a dotted path such as "a.b.c" in nested dicts (d["a"]["b"]["c"]); return None when a key is
        missing or a value on the way is not a dict.""",
        "def nested_get(d: dict, path: str)",
        ["nested_get({'a': {'b': {'c': 1}}}, 'a.b.c') == 1", "nested_get({'a': 1}, 'b') == None"],
        [
            "nested_get({'a': {'b': 2}}, 'a') == {'b': 2}",
            "nested_get({'a': {'b': 2}}, 'a.c') == None",
            "nested_get({'a': 1}, 'a.b') == None",
            "nested_get({}, 'x.y') == None",
            "nested_get({'a': {'b': 0}}, 'a.b') == 0",
            "nested_get({'a': {'b': None}}, 'a.b.c') == None",
        ],
        """
        def nested_get(d: dict, path: str):
            current = d
            for part in path.split("."):
                if not isinstance(current, dict) or part not in current:
                    return None
                current = current[part]
            return current
        """,
        [
            """
            def nested_get(d: dict, path: str):
                return d.get(path)
            """,
            """
            def nested_get(d: dict, path: str):
                current = d
                for part in path.split("."):
                    current = current.get(part)
                return current
            """,
        ],
    ),
    P(
        "dict_diff", "dicts", "medium",
        """Compare two versions of a dict: return {"added": …, "removed": …, "changed": …}, each a sorted list of
        keys — keys only in new, keys only in old, and keys in both whose values differ.""",
        "def dict_diff(old: dict, new: dict) -> dict[str, list]",
        [
            "dict_diff({'a': 1, 'b': 2}, {'b': 3, 'c': 4}) == {'added': ['c'], 'removed': ['a'], 'changed': ['b']}",
            "dict_diff({}, {}) == {'added': [], 'removed': [], 'changed': []}",
        ],
        [
            "dict_diff({'a': 1}, {'a': 1}) == {'added': [], 'removed': [], 'changed': []}",
            "dict_diff({'x': 1}, {}) == {'added': [], 'removed': ['x'], 'changed': []}",
            "dict_diff({}, {'y': 2, 'x': 1}) == {'added': ['x', 'y'], 'removed': [], 'changed': []}",
            "dict_diff({'a': 1, 'b': 1}, {'a': 2, 'b': 2}) == {'added': [], 'removed': [], 'changed': ['a', 'b']}",
            "dict_diff({'k': None}, {'k': 0}) == {'added': [], 'removed': [], 'changed': ['k']}",
            "dict_diff({'s': 'x', 't': 1}, {'s': 'x', 't': 2}) == {'added': [], 'removed': [], 'changed': ['t']}",
        ],
        """
        def dict_diff(old: dict, new: dict) -> dict[str, list]:
            return {
                "added": sorted(new.keys() - old.keys()),
                "removed": sorted(old.keys() - new.keys()),
                "changed": sorted(k for k in old.keys() & new.keys() if old[k] != new[k]),
            }
        """,
        [
            """
            def dict_diff(old: dict, new: dict) -> dict[str, list]:
                return {
                    "added": sorted(old.keys() - new.keys()),
                    "removed": sorted(new.keys() - old.keys()),
                    "changed": sorted(k for k in old.keys() & new.keys() if old[k] != new[k]),
                }
            """,
            """
            def dict_diff(old: dict, new: dict) -> dict[str, list]:
                return {
                    "added": sorted(new.keys() - old.keys()),
                    "removed": sorted(old.keys() - new.keys()),
                    "changed": sorted(old.keys() & new.keys()),
                }
            """,
        ],
    ),
    P(
        "char_positions", "dicts", "easy",
        """Map each character of a text to the list of its 0-based positions, in increasing order; upper and
        lower case are different characters.""",
        "def char_positions(text: str) -> dict[str, list[int]]",
        ["char_positions('abca') == {'a': [0, 3], 'b': [1], 'c': [2]}", "char_positions('') == {}"],
        [
            "char_positions('aaa') == {'a': [0, 1, 2]}",
            "char_positions('ab ba') == {'a': [0, 4], 'b': [1, 3], ' ': [2]}",
            "char_positions('Aa') == {'A': [0], 'a': [1]}",
            "char_positions('x') == {'x': [0]}",
            "char_positions('1212') == {'1': [0, 2], '2': [1, 3]}",
            "char_positions('bB') == {'b': [0], 'B': [1]}",
        ],
        """
        def char_positions(text: str) -> dict[str, list[int]]:
            out = {}
            for i, c in enumerate(text):
                out.setdefault(c, []).append(i)
            return out
        """,
        [
            """
            def char_positions(text: str) -> dict[str, list[int]]:
                out = {}
                for i, c in enumerate(text, 1):
                    out.setdefault(c, []).append(i)
                return out
            """,
            """
            def char_positions(text: str) -> dict[str, list[int]]:
                out = {}
                for i, c in enumerate(text.lower()):
                    out.setdefault(c, []).append(i)
                return out
            """,
        ],
    ),
    P(
        "count_by_key", "dicts", "easy",
        """Given a list of records (dicts), count how many records have each value of the field `key`; records
        without that field are skipped. Return a dict value → count.""",
        "def count_by_key(records: list[dict], key: str) -> dict",
        [
            "count_by_key([{'c': 'red'}, {'c': 'blue'}, {'c': 'red'}], 'c') == {'red': 2, 'blue': 1}",
            "count_by_key([], 'c') == {}",
        ],
        [
            "count_by_key([{'a': 1}, {'b': 2}], 'a') == {1: 1}",
            "count_by_key([{'k': None}, {'k': None}], 'k') == {None: 2}",
            "count_by_key([{'x': 1}, {'x': 2}, {'y': 1}], 'y') == {1: 1}",
            "count_by_key([{'t': 'a'}] * 3, 't') == {'a': 3}",
            "count_by_key([{}], 'z') == {}",
            "count_by_key([{'n': 0}, {'n': False}, {'m': 0}], 'n') == {0: 2}",
        ],
        """
        def count_by_key(records: list[dict], key: str) -> dict:
            counts = {}
            for record in records:
                if key in record:
                    counts[record[key]] = counts.get(record[key], 0) + 1
            return counts
        """,
        [
            """
            def count_by_key(records: list[dict], key: str) -> dict:
                counts = {}
                for record in records:
                    for k in record:
                        counts[k] = counts.get(k, 0) + 1
                return counts
            """,
            """
            def count_by_key(records: list[dict], key: str) -> dict:
                counts = {}
                for record in records:
                    value = record.get(key)
                    counts[value] = counts.get(value, 0) + 1
                return counts
            """,
        ],
    ),
    P(
        "deep_merge", "dicts", "medium",
        """Merge settings into defaults: the result has every key of both; where both values are dicts they are
        merged the same way, at any depth; otherwise the value from `overrides` wins. Do not modify the
        arguments.""",
        "def deep_merge(defaults: dict, overrides: dict) -> dict",
        [
            "deep_merge({'a': 1, 'b': {'x': 1, 'y': 2}}, {'b': {'y': 3}}) == {'a': 1, 'b': {'x': 1, 'y': 3}}",
            "deep_merge({}, {'a': 1}) == {'a': 1}",
        ],
        [
            "deep_merge({'a': {'b': {'c': 1}}}, {'a': {'b': {'d': 2}}}) == {'a': {'b': {'c': 1, 'd': 2}}}",
            "deep_merge({'a': {'x': 1}}, {'a': 5}) == {'a': 5}",
            "deep_merge({'a': 5}, {'a': {'x': 1}}) == {'a': {'x': 1}}",
            "deep_merge({'a': 1}, {}) == {'a': 1}",
            "deep_merge({'l': [1, 2]}, {'l': [3]}) == {'l': [3]}",
            "deep_merge({'p': {'q': {'r': 1, 's': 2}}}, {'p': {'q': {'s': 3}}}) == {'p': {'q': {'r': 1, 's': 3}}}",
        ],
        """
        def deep_merge(defaults: dict, overrides: dict) -> dict:
            out = dict(defaults)
            for key, value in overrides.items():
                if isinstance(value, dict) and isinstance(out.get(key), dict):
                    out[key] = deep_merge(out[key], value)
                else:
                    out[key] = value
            return out
        """,
        [
            """
            def deep_merge(defaults: dict, overrides: dict) -> dict:
                return {**defaults, **overrides}
            """,
            """
            def deep_merge(defaults: dict, overrides: dict) -> dict:
                out = dict(defaults)
                for key, value in overrides.items():
                    if isinstance(value, dict) and isinstance(out.get(key), dict):
                        out[key] = {**out[key], **value}
                    else:
                        out[key] = value
                return out
            """,
        ],
    ),
    # ================================================================== math
    P(
        "gcd_list", "math", "easy",
        """The greatest common divisor of a list of non-negative integers; 0 for an empty list (gcd(0, n) is n).""",
        "def gcd_list(nums: list[int]) -> int",
        ["gcd_list([12, 18, 24]) == 6", "gcd_list([7]) == 7"],
        [
            "gcd_list([]) == 0",
            "gcd_list([0, 5]) == 5",
            "gcd_list([17, 34, 51]) == 17",
            "gcd_list([9, 28]) == 1",
            "gcd_list([100, 75, 50]) == 25",
            "gcd_list([0, 0]) == 0",
        ],
        """
        def gcd_list(nums: list[int]) -> int:
            result = 0
            for n in nums:
                a, b = result, n
                while b:
                    a, b = b, a % b
                result = a
            return result
        """,
        [
            """
            def gcd_list(nums: list[int]) -> int:
                return min(nums)
            """,
            """
            import math
            from functools import reduce


            def gcd_list(nums: list[int]) -> int:
                return reduce(math.gcd, nums)
            """,
        ],
    ),
    P(
        "is_prime", "math", "easy",
        """Whether an integer is prime. Numbers below 2 (0, 1 and negative numbers) are not prime.""",
        "def is_prime(n: int) -> bool",
        ["is_prime(7) == True", "is_prime(9) == False"],
        [
            "is_prime(1) == False",
            "is_prime(2) == True",
            "is_prime(0) == False",
            "is_prime(-7) == False",
            "is_prime(7919) == True",
            "is_prime(91) == False",
        ],
        """
        def is_prime(n: int) -> bool:
            if n < 2:
                return False
            d = 2
            while d * d <= n:
                if n % d == 0:
                    return False
                d += 1
            return True
        """,
        [
            """
            def is_prime(n: int) -> bool:
                return n == 2 or (n > 1 and n % 2 == 1)
            """,
            """
            def is_prime(n: int) -> bool:
                return all(n % d for d in range(2, n))
            """,
        ],
    ),
    P(
        "digital_root", "math", "easy",
        """Repeatedly replace a non-negative integer by the sum of its decimal digits until one digit is left;
        return that digit.""",
        "def digital_root(n: int) -> int",
        ["digital_root(38) == 2", "digital_root(0) == 0"],
        [
            "digital_root(9) == 9",
            "digital_root(10) == 1",
            "digital_root(999999) == 9",
            "digital_root(123456789) == 9",
            "digital_root(19) == 1",
            "digital_root(5) == 5",
        ],
        """
        def digital_root(n: int) -> int:
            while n >= 10:
                n = sum(int(d) for d in str(n))
            return n
        """,
        [
            """
            def digital_root(n: int) -> int:
                return sum(int(d) for d in str(n))
            """,
            """
            def digital_root(n: int) -> int:
                return n % 9
            """,
        ],
    ),
    P(
        "fib", "math", "easy",
        """The n-th Fibonacci number, exactly: fib(0) = 0, fib(1) = 1, fib(n) = fib(n - 1) + fib(n - 2).
        n can be up to 100.""",
        "def fib(n: int) -> int",
        ["fib(10) == 55", "fib(1) == 1"],
        [
            "fib(0) == 0",
            "fib(2) == 1",
            "fib(20) == 6765",
            "fib(50) == 12586269025",
            "fib(90) == 2880067194370816120",
            "fib(100) == 354224848179261915075",
        ],
        """
        def fib(n: int) -> int:
            a, b = 0, 1
            for _ in range(n):
                a, b = b, a + b
            return a
        """,
        [
            """
            def fib(n: int) -> int:
                a, b = 0, 1
                for _ in range(n - 1):
                    a, b = b, a + b
                return a
            """,
            """
            def fib(n: int) -> int:
                phi = (1 + 5 ** 0.5) / 2
                return round(phi ** n / 5 ** 0.5)
            """,
        ],
    ),
    P(
        "int_to_roman", "math", "medium",
        """Write a number from 1 to 3999 in Roman numerals, with the subtractive forms IV, IX, XL, XC, CD and CM.""",
        "def int_to_roman(n: int) -> str",
        ["int_to_roman(3) == 'III'", "int_to_roman(58) == 'LVIII'"],
        [
            "int_to_roman(4) == 'IV'",
            "int_to_roman(9) == 'IX'",
            "int_to_roman(1994) == 'MCMXCIV'",
            "int_to_roman(3999) == 'MMMCMXCIX'",
            "int_to_roman(40) == 'XL'",
            "int_to_roman(444) == 'CDXLIV'",
        ],
        """
        def int_to_roman(n: int) -> str:
            values = [
                (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
            ]
            out = []
            for value, symbol in values:
                while n >= value:
                    out.append(symbol)
                    n -= value
            return "".join(out)
        """,
        [
            """
            def int_to_roman(n: int) -> str:
                values = [(1, "I"), (5, "V"), (10, "X"), (50, "L"), (100, "C"), (500, "D"), (1000, "M")]
                out = []
                for value, symbol in values:
                    while n >= value:
                        out.append(symbol)
                        n -= value
                return "".join(out)
            """,
            """
            def int_to_roman(n: int) -> str:
                values = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I")]
                out = []
                for value, symbol in values:
                    while n >= value:
                        out.append(symbol)
                        n -= value
                return "".join(out)
            """,
        ],
    ),
    P(
        "to_base", "math", "medium",
        """Write an integer in base b (2 ≤ b ≤ 16) with the digits 0-9 and lower-case a-f; a negative number gets
        a leading "-", and 0 is "0".""",
        "def to_base(n: int, b: int) -> str",
        ["to_base(10, 2) == '1010'", "to_base(255, 16) == 'ff'"],
        [
            "to_base(0, 2) == '0'",
            "to_base(-5, 2) == '-101'",
            "to_base(7, 8) == '7'",
            "to_base(100, 3) == '10201'",
            "to_base(35, 16) == '23'",
            "to_base(15, 16) == 'f'",
        ],
        """
        def to_base(n: int, b: int) -> str:
            if n == 0:
                return "0"
            digits = "0123456789abcdef"
            sign = "-" if n < 0 else ""
            n = abs(n)
            out = []
            while n:
                n, d = divmod(n, b)
                out.append(digits[d])
            return sign + "".join(reversed(out))
        """,
        [
            """
            def to_base(n: int, b: int) -> str:
                digits = "0123456789abcdef"
                sign = "-" if n < 0 else ""
                n = abs(n)
                out = []
                while n:
                    n, d = divmod(n, b)
                    out.append(digits[d])
                return sign + ("".join(out) or "0")
            """,
            """
            def to_base(n: int, b: int) -> str:
                digits = "0123456789abcdef"
                out = []
                while n > 0:
                    n, d = divmod(n, b)
                    out.append(digits[d])
                return "".join(reversed(out))
            """,
        ],
    ),
    P(
        "isqrt_floor", "math", "medium",
        """The integer square root of a non-negative integer: the largest r with r * r <= n. It must be exact for
        very large n (more than 30 digits).""",
        "def isqrt_floor(n: int) -> int",
        ["isqrt_floor(16) == 4", "isqrt_floor(15) == 3"],
        [
            "isqrt_floor(0) == 0",
            "isqrt_floor(1) == 1",
            "isqrt_floor(24) == 4",
            "isqrt_floor(25) == 5",
            "isqrt_floor(10 ** 30) == 1000000000000000",
            "isqrt_floor(10 ** 30 + 2 * 10 ** 15) == 1000000000000000",
        ],
        """
        def isqrt_floor(n: int) -> int:
            if n < 2:
                return n
            x = n
            y = (x + 1) // 2
            while y < x:
                x = y
                y = (x + n // x) // 2
            return x
        """,
        [
            """
            def isqrt_floor(n: int) -> int:
                return round(n ** 0.5)
            """,
            """
            def isqrt_floor(n: int) -> int:
                return int(n ** 0.5)
            """,
        ],
    ),
    P(
        "lcm_range", "math", "medium",
        """The smallest positive integer divisible by every integer from 1 to n (n ≥ 1), exactly (the answer for
        n = 50 has 22 digits).""",
        "def lcm_range(n: int) -> int",
        ["lcm_range(10) == 2520", "lcm_range(1) == 1"],
        [
            "lcm_range(2) == 2",
            "lcm_range(5) == 60",
            "lcm_range(20) == 232792560",
            "lcm_range(3) == 6",
            "lcm_range(30) == 2329089562800",
            "lcm_range(50) == 3099044504245996706400",
        ],
        """
        def lcm_range(n: int) -> int:
            def gcd(a, b):
                while b:
                    a, b = b, a % b
                return a

            result = 1
            for i in range(2, n + 1):
                result = result * i // gcd(result, i)
            return result
        """,
        [
            """
            def lcm_range(n: int) -> int:
                result = 1
                for i in range(2, n + 1):
                    result *= i
                return result
            """,
            """
            import math


            def lcm_range(n: int) -> int:
                result = 1.0
                for i in range(2, n + 1):
                    result = result * i / math.gcd(int(result), i)
                return int(result)
            """,
        ],
    ),
    P(
        "pascal_row", "math", "easy",
        """Row n (counting from 0) of Pascal's triangle, as a list of integers: row 0 is [1], row 1 is [1, 1].""",
        "def pascal_row(n: int) -> list[int]",
        ["pascal_row(0) == [1]", "pascal_row(4) == [1, 4, 6, 4, 1]"],
        [
            "pascal_row(1) == [1, 1]",
            "pascal_row(2) == [1, 2, 1]",
            "pascal_row(5) == [1, 5, 10, 10, 5, 1]",
            "pascal_row(6) == [1, 6, 15, 20, 15, 6, 1]",
            "pascal_row(10) == [1, 10, 45, 120, 210, 252, 210, 120, 45, 10, 1]",
            "pascal_row(7) == [1, 7, 21, 35, 35, 21, 7, 1]",
        ],
        """
        def pascal_row(n: int) -> list[int]:
            row = [1]
            for k in range(n):
                row.append(row[-1] * (n - k) // (k + 1))
            return row
        """,
        [
            """
            def pascal_row(n: int) -> list[int]:
                row = [1]
                for _ in range(n + 1):
                    row = [1] + [row[i] + row[i + 1] for i in range(len(row) - 1)] + [1]
                return row
            """,
            """
            def pascal_row(n: int) -> list[int]:
                row = [1]
                for k in range(n):
                    row.append(row[-1] // (k + 1) * (n - k))
                return row
            """,
        ],
    ),
    P(
        "divisors", "math", "easy",
        """All positive divisors of a positive integer, in increasing order (1 and the number itself
        included).""",
        "def divisors(n: int) -> list[int]",
        ["divisors(12) == [1, 2, 3, 4, 6, 12]", "divisors(10) == [1, 2, 5, 10]"],
        [
            "divisors(1) == [1]",
            "divisors(7) == [1, 7]",
            "divisors(16) == [1, 2, 4, 8, 16]",
            "divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]",
            "divisors(2) == [1, 2]",
            "divisors(100) == [1, 2, 4, 5, 10, 20, 25, 50, 100]",
        ],
        """
        def divisors(n: int) -> list[int]:
            small, large = [], []
            d = 1
            while d * d <= n:
                if n % d == 0:
                    small.append(d)
                    if d != n // d:
                        large.append(n // d)
                d += 1
            return small + large[::-1]
        """,
        [
            """
            def divisors(n: int) -> list[int]:
                return [d for d in range(1, n) if n % d == 0]
            """,
            """
            def divisors(n: int) -> list[int]:
                small, large = [], []
                d = 1
                while d * d <= n:
                    if n % d == 0:
                        small.append(d)
                        large.append(n // d)
                    d += 1
                return small + large[::-1]
            """,
        ],
    ),
    P(
        "mean_median", "math", "easy",
        """The mean and the median of a non-empty list of numbers, as a tuple of two floats. The median of an
        even number of values is the mean of the two middle values (in sorted order).""",
        "def mean_median(nums: list[float]) -> tuple[float, float]",
        ["mean_median([1, 2, 3, 4]) == (2.5, 2.5)", "mean_median([5]) == (5.0, 5.0)"],
        [
            "mean_median([3, 1, 2]) == (2.0, 2.0)",
            "mean_median([1, 1, 10]) == (4.0, 1.0)",
            "mean_median([-1, 1]) == (0.0, 0.0)",
            "mean_median([1, 2, 3, 4, 100]) == (22.0, 3.0)",
            "mean_median([2.5, 3.5]) == (3.0, 3.0)",
            "mean_median([4, 1, 3, 2]) == (2.5, 2.5)",
        ],
        """
        def mean_median(nums: list[float]) -> tuple[float, float]:
            ordered = sorted(nums)
            n = len(ordered)
            middle = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
            return sum(nums) / n, float(middle)
        """,
        [
            """
            def mean_median(nums: list[float]) -> tuple[float, float]:
                ordered = sorted(nums)
                return sum(nums) / len(nums), float(ordered[len(ordered) // 2])
            """,
            """
            def mean_median(nums: list[float]) -> tuple[float, float]:
                n = len(nums)
                middle = nums[n // 2] if n % 2 else (nums[n // 2 - 1] + nums[n // 2]) / 2
                return sum(nums) / n, float(middle)
            """,
        ],
    ),
    # ================================================================== parsing
    P(
        "parse_csv_line", "parsing", "hard",
        """Split one line of CSV into its fields. Fields are separated by commas; a field may be enclosed in
        double quotes, and then it may contain commas, and a doubled quote "" inside it stands for one quote
        character. The empty line is one empty field.""",
        "def parse_csv_line(line: str) -> list[str]",
        ["parse_csv_line('a,b,c') == ['a', 'b', 'c']", "parse_csv_line('\"x,y\",z') == ['x,y', 'z']"],
        [
            "parse_csv_line('') == ['']",
            "parse_csv_line('a,,b') == ['a', '', 'b']",
            "parse_csv_line('\"say \"\"hi\"\"\",2') == ['say \"hi\"', '2']",
            "parse_csv_line(',') == ['', '']",
            "parse_csv_line('\"\",x') == ['', 'x']",
            "parse_csv_line('\"a\"\"\"') == ['a\"']",
        ],
        """
        def parse_csv_line(line: str) -> list[str]:
            fields, field, quoted = [], [], False
            i = 0
            while i < len(line):
                c = line[i]
                if quoted:
                    if c == '"' and i + 1 < len(line) and line[i + 1] == '"':
                        field.append('"')
                        i += 1
                    elif c == '"':
                        quoted = False
                    else:
                        field.append(c)
                elif c == '"':
                    quoted = True
                elif c == ",":
                    fields.append("".join(field))
                    field = []
                else:
                    field.append(c)
                i += 1
            fields.append("".join(field))
            return fields
        """,
        [
            """
            def parse_csv_line(line: str) -> list[str]:
                return line.split(",")
            """,
            """
            def parse_csv_line(line: str) -> list[str]:
                fields, field, quoted = [], [], False
                for c in line:
                    if c == '"':
                        quoted = not quoted
                    elif c == "," and not quoted:
                        fields.append("".join(field))
                        field = []
                    else:
                        field.append(c)
                fields.append("".join(field))
                return fields
            """,
        ],
    ),
    P(
        "parse_query_string", "parsing", "medium",
        """Parse a URL query string such as "a=1&b=2" into a dict of strings. Pairs are separated by "&" (empty
        pairs are skipped); a pair without "=" has the value ""; only the first "=" separates key and value;
        "+" means a space and %XX escapes are decoded; when a key repeats, the last value wins.""",
        "def parse_query_string(query: str) -> dict[str, str]",
        ["parse_query_string('a=1&b=2') == {'a': '1', 'b': '2'}", "parse_query_string('') == {}"],
        [
            "parse_query_string('name=John+Smith') == {'name': 'John Smith'}",
            "parse_query_string('x=%41%42') == {'x': 'AB'}",
            "parse_query_string('flag') == {'flag': ''}",
            "parse_query_string('a=1&a=2') == {'a': '2'}",
            "parse_query_string('e=a%3Db') == {'e': 'a=b'}",
            "parse_query_string('k=&&j=x=y') == {'k': '', 'j': 'x=y'}",
        ],
        """
        from urllib.parse import unquote_plus


        def parse_query_string(query: str) -> dict[str, str]:
            out = {}
            for pair in query.split("&"):
                if pair:
                    key, _, value = pair.partition("=")
                    out[unquote_plus(key)] = unquote_plus(value)
            return out
        """,
        [
            """
            def parse_query_string(query: str) -> dict[str, str]:
                return dict(pair.split("=") for pair in query.split("&"))
            """,
            """
            def parse_query_string(query: str) -> dict[str, str]:
                out = {}
                for pair in query.split("&"):
                    if pair:
                        key, _, value = pair.partition("=")
                        out[key] = value
                return out
            """,
        ],
    ),
    P(
        "parse_time_12h", "parsing", "medium",
        """Convert a 12-hour clock time such as "2:30 PM" to minutes after midnight. "AM"/"PM" may be in any
        case and surrounding spaces are ignored; 12:xx AM is just after midnight and 12:xx PM just after noon.""",
        "def parse_time_12h(text: str) -> int",
        ["parse_time_12h('2:30 PM') == 870", "parse_time_12h('9:05 AM') == 545"],
        [
            "parse_time_12h('12:00 AM') == 0",
            "parse_time_12h('12:00 PM') == 720",
            "parse_time_12h('12:59 AM') == 59",
            "parse_time_12h('11:59 PM') == 1439",
            "parse_time_12h('1:00 am') == 60",
            "parse_time_12h(' 7:15 pm ') == 1155",
        ],
        """
        def parse_time_12h(text: str) -> int:
            clock, half = text.split()
            hours, minutes = (int(part) for part in clock.split(":"))
            hours %= 12
            if half.upper() == "PM":
                hours += 12
            return hours * 60 + minutes
        """,
        [
            """
            def parse_time_12h(text: str) -> int:
                clock = text.split()[0]
                hours, minutes = (int(part) for part in clock.split(":"))
                return hours * 60 + minutes
            """,
            """
            def parse_time_12h(text: str) -> int:
                clock, half = text.split()
                hours, minutes = (int(part) for part in clock.split(":"))
                if half.upper() == "PM":
                    hours += 12
                return hours * 60 + minutes
            """,
        ],
    ),
    P(
        "parse_ranges", "parsing", "easy",
        """Expand a list of numbers and inclusive ranges such as "1-3,5,7-8" into the list of integers it
        describes, in the order written. Spaces around numbers are allowed; the empty string gives [].""",
        "def parse_ranges(text: str) -> list[int]",
        ["parse_ranges('1-3,5,7-8') == [1, 2, 3, 5, 7, 8]", "parse_ranges('4') == [4]"],
        [
            "parse_ranges('') == []",
            "parse_ranges('10-12') == [10, 11, 12]",
            "parse_ranges('3,1-2') == [3, 1, 2]",
            "parse_ranges(' 1 - 2 , 4 ') == [1, 2, 4]",
            "parse_ranges('5-5') == [5]",
            "parse_ranges('0-0,0') == [0, 0]",
        ],
        """
        def parse_ranges(text: str) -> list[int]:
            out = []
            if not text.strip():
                return out
            for part in text.split(","):
                first, _, last = part.partition("-")
                if last.strip():
                    out.extend(range(int(first), int(last) + 1))
                else:
                    out.append(int(first))
            return out
        """,
        [
            """
            def parse_ranges(text: str) -> list[int]:
                out = []
                for part in text.split(","):
                    first, _, last = part.partition("-")
                    if last:
                        out.extend(range(int(first), int(last)))
                    else:
                        out.append(int(first))
                return out
            """,
            """
            def parse_ranges(text: str) -> list[int]:
                out = []
                for part in text.split(","):
                    first, _, last = part.partition("-")
                    if last:
                        out.extend(range(int(first), int(last) + 1))
                    else:
                        out.append(int(first))
                return out
            """,
        ],
    ),
    P(
        "roman_to_int", "parsing", "medium",
        """Read a Roman numeral (I, V, X, L, C, D, M, with the subtractive forms IV, IX, XL, XC, CD, CM) and
        return its value.""",
        "def roman_to_int(numeral: str) -> int",
        ["roman_to_int('III') == 3", "roman_to_int('LVIII') == 58"],
        [
            "roman_to_int('IV') == 4",
            "roman_to_int('IX') == 9",
            "roman_to_int('MCMXCIV') == 1994",
            "roman_to_int('XL') == 40",
            "roman_to_int('MMMCMXCIX') == 3999",
            "roman_to_int('CDXLIV') == 444",
        ],
        """
        def roman_to_int(numeral: str) -> int:
            values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
            total = 0
            for i, c in enumerate(numeral):
                value = values[c]
                if i + 1 < len(numeral) and values[numeral[i + 1]] > value:
                    total -= value
                else:
                    total += value
            return total
        """,
        [
            """
            def roman_to_int(numeral: str) -> int:
                values = {"I": 1, "V": 5, "X": 10, "L": 500, "C": 100, "D": 50, "M": 1000}
                total = 0
                for i, c in enumerate(numeral):
                    value = values[c]
                    if i + 1 < len(numeral) and values[numeral[i + 1]] > value:
                        total -= value
                    else:
                        total += value
                return total
            """,
            """
            def roman_to_int(numeral: str) -> int:
                values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
                return sum(values[c] for c in numeral)
            """,
        ],
    ),
    P(
        "parse_kv_lines", "parsing", "medium",
        """Parse "key = value" lines into a dict of strings. Keys and values are stripped of surrounding spaces;
        only the first "=" separates them (a value may contain "="); blank lines and lines whose first
        non-space character is "#" are skipped; a repeated key keeps its last value.""",
        "def parse_kv_lines(text: str) -> dict[str, str]",
        ["parse_kv_lines('a = 1\\nb=2') == {'a': '1', 'b': '2'}", "parse_kv_lines('') == {}"],
        [
            "parse_kv_lines('# comment\\nx = y') == {'x': 'y'}",
            "parse_kv_lines('url = http://a?b=c') == {'url': 'http://a?b=c'}",
            "parse_kv_lines('\\n\\n k =  v  \\n') == {'k': 'v'}",
            "parse_kv_lines('dup=1\\ndup=2') == {'dup': '2'}",
            "parse_kv_lines('  # indented comment\\nz=0') == {'z': '0'}",
            "parse_kv_lines('eq = a=b=c') == {'eq': 'a=b=c'}",
        ],
        """
        def parse_kv_lines(text: str) -> dict[str, str]:
            out = {}
            for line in text.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                key, _, value = line.partition("=")
                out[key.strip()] = value.strip()
            return out
        """,
        [
            """
            def parse_kv_lines(text: str) -> dict[str, str]:
                out = {}
                for line in text.splitlines():
                    if not line or line.startswith("#"):
                        continue
                    key, _, value = line.partition("=")
                    out[key] = value
                return out
            """,
            """
            def parse_kv_lines(text: str) -> dict[str, str]:
                out = {}
                for line in text.splitlines():
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    key, value = line.split("=")
                    out[key.strip()] = value.strip()
                return out
            """,
        ],
    ),
    P(
        "tokenize_arith", "parsing", "medium",
        """Split an arithmetic expression into tokens: each run of digits becomes an int (leading zeros allowed),
        each of + - * / ( ) becomes a one-character string, and spaces are skipped.""",
        "def tokenize_arith(expr: str) -> list",
        [
            "tokenize_arith('3+4*(2-1)') == [3, '+', 4, '*', '(', 2, '-', 1, ')']",
            "tokenize_arith('42') == [42]",
        ],
        [
            "tokenize_arith('') == []",
            "tokenize_arith(' 12 / 3 ') == [12, '/', 3]",
            "tokenize_arith('(1)') == ['(', 1, ')']",
            "tokenize_arith('100-20-3') == [100, '-', 20, '-', 3]",
            "tokenize_arith('7*08') == [7, '*', 8]",
            "tokenize_arith('1 + 23 + 456') == [1, '+', 23, '+', 456]",
        ],
        """
        def tokenize_arith(expr: str) -> list:
            tokens = []
            i = 0
            while i < len(expr):
                c = expr[i]
                if c.isdigit():
                    j = i
                    while j < len(expr) and expr[j].isdigit():
                        j += 1
                    tokens.append(int(expr[i:j]))
                    i = j
                    continue
                if c in "+-*/()":
                    tokens.append(c)
                i += 1
            return tokens
        """,
        [
            """
            def tokenize_arith(expr: str) -> list:
                return [int(c) if c.isdigit() else c for c in expr if c != " "]
            """,
            """
            def tokenize_arith(expr: str) -> list:
                tokens = []
                i = 0
                while i < len(expr):
                    if expr[i].isdigit():
                        j = i
                        while j < len(expr) and expr[j].isdigit():
                            j += 1
                        tokens.append(int(expr[i:j]))
                        i = j
                    else:
                        tokens.append(expr[i])
                        i += 1
                return tokens
            """,
        ],
    ),
    P(
        "eval_rpn", "parsing", "medium",
        """Evaluate an expression in reverse Polish notation given as a list of tokens (integers as strings, and
        the operators + - * /). Division truncates toward zero (-7 / 2 is -3).""",
        "def eval_rpn(tokens: list[str]) -> int",
        ["eval_rpn(['2', '1', '+', '3', '*']) == 9", "eval_rpn(['4', '13', '5', '/', '+']) == 6"],
        [
            "eval_rpn(['3']) == 3",
            "eval_rpn(['7', '-2', '/']) == -3",
            "eval_rpn(['2', '3', '-']) == -1",
            "eval_rpn(['-7', '2', '/']) == -3",
            "eval_rpn(['10', '6', '9', '3', '+', '-11', '*', '/', '*', '17', '+', '5', '+']) == 22",
            "eval_rpn(['0', '5', '/']) == 0",
        ],
        """
        def eval_rpn(tokens: list[str]) -> int:
            stack = []
            for token in tokens:
                if token in ("+", "-", "*", "/"):
                    b = stack.pop()
                    a = stack.pop()
                    if token == "+":
                        stack.append(a + b)
                    elif token == "-":
                        stack.append(a - b)
                    elif token == "*":
                        stack.append(a * b)
                    else:
                        q = abs(a) // abs(b)
                        stack.append(q if (a < 0) == (b < 0) else -q)
                else:
                    stack.append(int(token))
            return stack[-1]
        """,
        [
            """
            def eval_rpn(tokens: list[str]) -> int:
                stack = []
                for token in tokens:
                    if token in ("+", "-", "*", "/"):
                        a = stack.pop()
                        b = stack.pop()
                        if token == "+":
                            stack.append(a + b)
                        elif token == "-":
                            stack.append(a - b)
                        elif token == "*":
                            stack.append(a * b)
                        else:
                            stack.append(int(a / b))
                    else:
                        stack.append(int(token))
                return stack[-1]
            """,
            """
            def eval_rpn(tokens: list[str]) -> int:
                stack = []
                for token in tokens:
                    if token in ("+", "-", "*", "/"):
                        b = stack.pop()
                        a = stack.pop()
                        if token == "+":
                            stack.append(a + b)
                        elif token == "-":
                            stack.append(a - b)
                        elif token == "*":
                            stack.append(a * b)
                        else:
                            stack.append(a // b)
                    else:
                        stack.append(int(token))
                return stack[-1]
            """,
        ],
    ),
    P(
        "compare_versions", "parsing", "easy",
        """Compare two version strings made of dot-separated integers: -1 if a is older than b, 1 if newer, 0 if
        equal. Parts compare as numbers (1.10 is newer than 1.9) and missing parts count as 0 (1.0 equals 1).""",
        "def compare_versions(a: str, b: str) -> int",
        ["compare_versions('1.2', '1.10') == -1", "compare_versions('2.0', '1.9.9') == 1"],
        [
            "compare_versions('1.0', '1') == 0",
            "compare_versions('1.0.1', '1') == 1",
            "compare_versions('0.9', '0.10') == -1",
            "compare_versions('3', '3.0.0.0') == 0",
            "compare_versions('1.2.3', '1.2.3') == 0",
            "compare_versions('10.0', '9.99') == 1",
        ],
        """
        def compare_versions(a: str, b: str) -> int:
            x = [int(p) for p in a.split(".")]
            y = [int(p) for p in b.split(".")]
            n = max(len(x), len(y))
            x += [0] * (n - len(x))
            y += [0] * (n - len(y))
            return (x > y) - (x < y)
        """,
        [
            """
            def compare_versions(a: str, b: str) -> int:
                return (a > b) - (a < b)
            """,
            """
            def compare_versions(a: str, b: str) -> int:
                x = [int(p) for p in a.split(".")]
                y = [int(p) for p in b.split(".")]
                return (x > y) - (x < y)
            """,
        ],
    ),
    P(
        "parse_hex_color", "parsing", "easy",
        """Read a CSS hex colour "#rrggbb" or its short form "#rgb" (each digit doubled: "#f80" is "#ff8800"),
        in either case, as a tuple (red, green, blue) of integers 0-255.""",
        "def parse_hex_color(color: str) -> tuple[int, int, int]",
        ["parse_hex_color('#ff8800') == (255, 136, 0)", "parse_hex_color('#000000') == (0, 0, 0)"],
        [
            "parse_hex_color('#FFF') == (255, 255, 255)",
            "parse_hex_color('#f80') == (255, 136, 0)",
            "parse_hex_color('#AbCdEf') == (171, 205, 239)",
            "parse_hex_color('#123') == (17, 34, 51)",
            "parse_hex_color('#0a0b0c') == (10, 11, 12)",
            "parse_hex_color('#FFFFFF') == (255, 255, 255)",
        ],
        """
        def parse_hex_color(color: str) -> tuple[int, int, int]:
            digits = color.lstrip("#")
            if len(digits) == 3:
                digits = "".join(d * 2 for d in digits)
            return tuple(int(digits[i : i + 2], 16) for i in (0, 2, 4))
        """,
        [
            """
            def parse_hex_color(color: str) -> tuple[int, int, int]:
                return tuple(int(color[i : i + 2], 16) for i in (0, 2, 4))
            """,
            """
            def parse_hex_color(color: str) -> tuple[int, int, int]:
                digits = color.lstrip("#")
                return tuple(int(digits[i : i + 2], 16) for i in (0, 2, 4))
            """,
        ],
    ),
    P(
        "extract_numbers", "parsing", "medium",
        """All numbers in a text, in order: a run of digits is an int, digits with a decimal point and more
        digits ("3.14") a float, and a "-" directly before the digits makes the number negative.""",
        "def extract_numbers(text: str) -> list[float]",
        ["extract_numbers('a1b22c333') == [1, 22, 333]", "extract_numbers('pi is 3.14') == [3.14]"],
        [
            "extract_numbers('') == []",
            "extract_numbers('temp -5 to 10.5') == [-5, 10.5]",
            "extract_numbers('no digits') == []",
            "extract_numbers('007') == [7]",
            "extract_numbers('x=-12,y=4') == [-12, 4]",
            "extract_numbers('3 4 5') == [3, 4, 5]",
        ],
        """
        import re


        def extract_numbers(text: str) -> list[float]:
            found = re.findall(r"-?\\d+(?:\\.\\d+)?", text)
            return [float(t) if "." in t else int(t) for t in found]
        """,
        [
            """
            import re


            def extract_numbers(text: str) -> list[float]:
                return [int(t) for t in re.findall(r"\\d+", text)]
            """,
            """
            import re


            def extract_numbers(text: str) -> list[float]:
                found = re.findall(r"\\d+(?:\\.\\d+)?", text)
                return [float(t) if "." in t else int(t) for t in found]
            """,
        ],
    ),
    # ================================================================== algorithms
    P(
        "binary_search", "algorithms", "easy",
        """The index of target in a list sorted in ascending order (with distinct values), or -1 if it is not
        there. Use binary search.""",
        "def binary_search(items: list[int], target: int) -> int",
        ["binary_search([1, 3, 5, 7, 9], 7) == 3", "binary_search([1, 3, 5], 4) == -1"],
        [
            "binary_search([], 1) == -1",
            "binary_search([5], 5) == 0",
            "binary_search([1, 2, 3, 4, 5, 6], 1) == 0",
            "binary_search([1, 2, 3, 4, 5, 6], 6) == 5",
            "binary_search([2, 4, 6, 8], 9) == -1",
            "binary_search([-5, -3, 0], -5) == 0",
        ],
        """
        def binary_search(items: list[int], target: int) -> int:
            lo, hi = 0, len(items) - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                if items[mid] == target:
                    return mid
                if items[mid] < target:
                    lo = mid + 1
                else:
                    hi = mid - 1
            return -1
        """,
        [
            """
            import bisect


            def binary_search(items: list[int], target: int) -> int:
                return bisect.bisect_left(items, target)
            """,
            """
            def binary_search(items: list[int], target: int) -> int:
                lo, hi = 0, len(items) - 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if items[mid] == target:
                        return mid
                    if items[mid] < target:
                        lo = mid + 1
                    else:
                        hi = mid - 1
                return -1
            """,
        ],
    ),
    P(
        "balanced_brackets", "algorithms", "easy",
        """Whether the brackets (), [] and {} in a text are balanced and properly nested; other characters are
        ignored.""",
        "def balanced_brackets(text: str) -> bool",
        ["balanced_brackets('([]{})') == True", "balanced_brackets('(]') == False"],
        [
            "balanced_brackets('') == True",
            "balanced_brackets('(((') == False",
            "balanced_brackets('())') == False",
            "balanced_brackets('a(b[c]d)e') == True",
            "balanced_brackets('([)]') == False",
            "balanced_brackets('}{') == False",
        ],
        """
        def balanced_brackets(text: str) -> bool:
            pairs = {")": "(", "]": "[", "}": "{"}
            stack = []
            for c in text:
                if c in "([{":
                    stack.append(c)
                elif c in pairs:
                    if not stack or stack.pop() != pairs[c]:
                        return False
            return not stack
        """,
        [
            """
            def balanced_brackets(text: str) -> bool:
                opened = sum(text.count(c) for c in "([{")
                closed = sum(text.count(c) for c in ")]}")
                return opened == closed
            """,
            """
            def balanced_brackets(text: str) -> bool:
                pairs = {")": "(", "]": "[", "}": "{"}
                stack = []
                for c in text:
                    if c in "([{":
                        stack.append(c)
                    elif c in pairs:
                        if not stack or stack.pop() != pairs[c]:
                            return False
                return True
            """,
        ],
    ),
    P(
        "max_subarray_sum", "algorithms", "medium",
        """The largest sum of a non-empty run of consecutive numbers in a non-empty list (negative when every
        number is negative).""",
        "def max_subarray_sum(nums: list[int]) -> int",
        ["max_subarray_sum([-2, 1, -3, 4, -1, 2, 1, -5, 4]) == 6", "max_subarray_sum([1]) == 1"],
        [
            "max_subarray_sum([-3, -1, -2]) == -1",
            "max_subarray_sum([5, 4, -1, 7, 8]) == 23",
            "max_subarray_sum([0]) == 0",
            "max_subarray_sum([-1, 0]) == 0",
            "max_subarray_sum([2, -1, 2]) == 3",
            "max_subarray_sum([-5]) == -5",
        ],
        """
        def max_subarray_sum(nums: list[int]) -> int:
            best = current = nums[0]
            for x in nums[1:]:
                current = max(x, current + x)
                best = max(best, current)
            return best
        """,
        [
            """
            def max_subarray_sum(nums: list[int]) -> int:
                return sum(x for x in nums if x > 0)
            """,
            """
            def max_subarray_sum(nums: list[int]) -> int:
                best = current = 0
                for x in nums:
                    current = max(0, current + x)
                    best = max(best, current)
                return best
            """,
        ],
    ),
    P(
        "count_islands", "algorithms", "medium",
        """Count the islands in a grid given as a list of strings of "0" and "1": an island is a group of "1"
        cells connected horizontally or vertically (not diagonally).""",
        "def count_islands(grid: list[str]) -> int",
        ["count_islands(['1100', '0001', '0011']) == 2", "count_islands(['000']) == 0"],
        [
            "count_islands([]) == 0",
            "count_islands(['1']) == 1",
            "count_islands(['101', '010', '101']) == 5",
            "count_islands(['111', '101', '111']) == 1",
            "count_islands(['11000', '11000', '00100', '00011']) == 3",
            "count_islands(['10', '01']) == 2",
        ],
        """
        def count_islands(grid: list[str]) -> int:
            seen = set()
            count = 0
            for r, row in enumerate(grid):
                for c, cell in enumerate(row):
                    if cell != "1" or (r, c) in seen:
                        continue
                    count += 1
                    stack = [(r, c)]
                    seen.add((r, c))
                    while stack:
                        i, j = stack.pop()
                        for a, b in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
                            inside = 0 <= a < len(grid) and 0 <= b < len(grid[a])
                            if inside and grid[a][b] == "1" and (a, b) not in seen:
                                seen.add((a, b))
                                stack.append((a, b))
            return count
        """,
        [
            """
            def count_islands(grid: list[str]) -> int:
                return sum(row.count("1") for row in grid)
            """,
            """
            def count_islands(grid: list[str]) -> int:
                seen = set()
                count = 0
                for r, row in enumerate(grid):
                    for c, cell in enumerate(row):
                        if cell != "1" or (r, c) in seen:
                            continue
                        count += 1
                        stack = [(r, c)]
                        seen.add((r, c))
                        while stack:
                            i, j = stack.pop()
                            for a in (i - 1, i, i + 1):
                                for b in (j - 1, j, j + 1):
                                    if 0 <= a < len(grid) and 0 <= b < len(grid[a]) and grid[a][b] == "1":
                                        if (a, b) not in seen:
                                            seen.add((a, b))
                                            stack.append((a, b))
                return count
            """,
        ],
    ),
    P(
        "shortest_path", "algorithms", "hard",
        """The fewest steps (up, down, left, right) from start to end in a grid of strings where "." is open and
        "#" is a wall; positions are (row, column). 0 when start is end, -1 when end cannot be reached.""",
        "def shortest_path(grid: list[str], start: tuple[int, int], end: tuple[int, int]) -> int",
        [
            "shortest_path(['...', '.#.', '...'], (0, 0), (2, 2)) == 4",
            "shortest_path(['.#', '#.'], (0, 0), (1, 1)) == -1",
        ],
        [
            "shortest_path(['.'], (0, 0), (0, 0)) == 0",
            "shortest_path(['....', '###.', '....'], (0, 0), (2, 0)) == 8",
            "shortest_path(['..', '..'], (0, 0), (0, 1)) == 1",
            "shortest_path(['.#.', '.#.', '...'], (0, 0), (0, 2)) == 6",
            "shortest_path(['...'], (0, 2), (0, 0)) == 2",
            "shortest_path(['..', '..'], (1, 1), (1, 1)) == 0",
        ],
        """
        from collections import deque


        def shortest_path(grid: list[str], start: tuple[int, int], end: tuple[int, int]) -> int:
            queue = deque([(start, 0)])
            seen = {start}
            while queue:
                (r, c), d = queue.popleft()
                if (r, c) == end:
                    return d
                for a, b in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    if 0 <= a < len(grid) and 0 <= b < len(grid[a]) and grid[a][b] == "." and (a, b) not in seen:
                        seen.add((a, b))
                        queue.append(((a, b), d + 1))
            return -1
        """,
        [
            """
            def shortest_path(grid: list[str], start: tuple[int, int], end: tuple[int, int]) -> int:
                return abs(start[0] - end[0]) + abs(start[1] - end[1])
            """,
            """
            from collections import deque


            def shortest_path(grid: list[str], start: tuple[int, int], end: tuple[int, int]) -> int:
                queue = deque([(start, 0)])
                seen = {start}
                while queue:
                    (r, c), d = queue.popleft()
                    for a, b in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                        if 0 <= a < len(grid) and 0 <= b < len(grid[a]) and grid[a][b] == "." and (a, b) not in seen:
                            if (a, b) == end:
                                return d + 1
                            seen.add((a, b))
                            queue.append(((a, b), d + 1))
                return -1
            """,
        ],
    ),
    P(
        "topo_sort", "algorithms", "hard",
        """Order tasks so that every task comes after its prerequisites. `deps` maps a task to the list of tasks
        it needs; a prerequisite that is not a key is a task with no prerequisites. Among the tasks that are
        ready at any point, take the alphabetically first. Return None if the dependencies have a cycle.""",
        "def topo_sort(deps: dict[str, list[str]]) -> list[str] | None",
        [
            "topo_sort({'b': ['a'], 'c': ['b'], 'a': []}) == ['a', 'b', 'c']",
            "topo_sort({'x': ['y'], 'y': ['x']}) == None",
        ],
        [
            "topo_sort({}) == []",
            "topo_sort({'a': []}) == ['a']",
            "topo_sort({'c': [], 'b': [], 'a': []}) == ['a', 'b', 'c']",
            "topo_sort({'d': ['b', 'c'], 'b': ['a'], 'c': ['a'], 'a': []}) == ['a', 'b', 'c', 'd']",
            "topo_sort({'b': ['a']}) == ['a', 'b']",
            "topo_sort({'a': ['a']}) == None",
        ],
        """
        import heapq


        def topo_sort(deps: dict[str, list[str]]) -> list[str] | None:
            tasks = set(deps) | {p for needs in deps.values() for p in needs}
            waiting = {t: set(deps.get(t, ())) for t in tasks}
            ready = [t for t in tasks if not waiting[t]]
            heapq.heapify(ready)
            order = []
            while ready:
                task = heapq.heappop(ready)
                order.append(task)
                for other in tasks:
                    if task in waiting[other]:
                        waiting[other].discard(task)
                        if not waiting[other]:
                            heapq.heappush(ready, other)
            return order if len(order) == len(tasks) else None
        """,
        [
            """
            def topo_sort(deps: dict[str, list[str]]) -> list[str] | None:
                return sorted(set(deps) | {p for needs in deps.values() for p in needs})
            """,
            """
            import heapq


            def topo_sort(deps: dict[str, list[str]]) -> list[str] | None:
                waiting = {t: set(needs) for t, needs in deps.items()}
                ready = [t for t in deps if not waiting[t]]
                heapq.heapify(ready)
                order = []
                while ready:
                    task = heapq.heappop(ready)
                    order.append(task)
                    for other in deps:
                        if task in waiting[other]:
                            waiting[other].discard(task)
                            if not waiting[other]:
                                heapq.heappush(ready, other)
                return order if len(order) == len(deps) else None
            """,
        ],
    ),
    P(
        "lis_length", "algorithms", "hard",
        """The length of the longest strictly increasing subsequence of a list (not necessarily contiguous).""",
        "def lis_length(nums: list[int]) -> int",
        ["lis_length([10, 9, 2, 5, 3, 7, 101, 18]) == 4", "lis_length([]) == 0"],
        [
            "lis_length([0, 1, 0, 3, 2, 3]) == 4",
            "lis_length([7, 7, 7]) == 1",
            "lis_length([1, 2, 3, 4]) == 4",
            "lis_length([4, 3, 2, 1]) == 1",
            "lis_length([3, 10, 2, 1, 20]) == 3",
            "lis_length([1, 3, 6, 7, 9, 4, 10, 5, 6]) == 6",
        ],
        """
        def lis_length(nums: list[int]) -> int:
            best = [1] * len(nums)
            for i in range(len(nums)):
                for j in range(i):
                    if nums[j] < nums[i]:
                        best[i] = max(best[i], best[j] + 1)
            return max(best, default=0)
        """,
        [
            """
            def lis_length(nums: list[int]) -> int:
                best = current = 0
                for i, x in enumerate(nums):
                    current = current + 1 if i and nums[i - 1] < x else 1
                    best = max(best, current)
                return best
            """,
            """
            def lis_length(nums: list[int]) -> int:
                best = [1] * len(nums)
                for i in range(len(nums)):
                    for j in range(i):
                        if nums[j] <= nums[i]:
                            best[i] = max(best[i], best[j] + 1)
                return max(best, default=0)
            """,
        ],
    ),
    P(
        "coin_change", "algorithms", "hard",
        """The fewest coins that add up to amount, with unlimited coins of each given value; 0 for amount 0 and
        -1 when the amount cannot be made.""",
        "def coin_change(coins: list[int], amount: int) -> int",
        ["coin_change([1, 2, 5], 11) == 3", "coin_change([2], 3) == -1"],
        [
            "coin_change([1], 0) == 0",
            "coin_change([1, 3, 4], 6) == 2",
            "coin_change([2, 5, 10, 1], 27) == 4",
            "coin_change([186, 419, 83, 408], 6249) == 20",
            "coin_change([5], 5) == 1",
            "coin_change([3, 7], 5) == -1",
        ],
        """
        def coin_change(coins: list[int], amount: int) -> int:
            unreachable = amount + 1
            best = [0] + [unreachable] * amount
            for total in range(1, amount + 1):
                for coin in coins:
                    if coin <= total:
                        best[total] = min(best[total], best[total - coin] + 1)
            return best[amount] if best[amount] != unreachable else -1
        """,
        [
            """
            def coin_change(coins: list[int], amount: int) -> int:
                count = 0
                for coin in sorted(coins, reverse=True):
                    count += amount // coin
                    amount %= coin
                return count
            """,
            """
            def coin_change(coins: list[int], amount: int) -> int:
                count = 0
                for coin in sorted(coins, reverse=True):
                    count += amount // coin
                    amount %= coin
                return count if amount == 0 else -1
            """,
        ],
    ),
    P(
        "merge_intervals", "algorithms", "medium",
        """Merge overlapping intervals [start, end] (start <= end, in any order) and return the merged ones sorted
        by start. Intervals that touch ([1, 4] and [4, 5]) overlap.""",
        "def merge_intervals(intervals: list[list[int]]) -> list[list[int]]",
        [
            "merge_intervals([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]",
            "merge_intervals([[1, 10], [2, 3]]) == [[1, 10]]",
        ],
        [
            "merge_intervals([]) == []",
            "merge_intervals([[1, 4], [4, 5]]) == [[1, 5]]",
            "merge_intervals([[5, 6], [1, 2]]) == [[1, 2], [5, 6]]",
            "merge_intervals([[1, 2]]) == [[1, 2]]",
            "merge_intervals([[2, 3], [1, 2], [6, 7]]) == [[1, 3], [6, 7]]",
            "merge_intervals([[1, 5], [2, 3], [4, 8]]) == [[1, 8]]",
        ],
        """
        def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
            merged = []
            for start, end in sorted(intervals):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            return merged
        """,
        [
            """
            def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
                merged = []
                for start, end in sorted(intervals):
                    if merged and start <= merged[-1][1]:
                        merged[-1][1] = end
                    else:
                        merged.append([start, end])
                return merged
            """,
            """
            def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
                merged = []
                for start, end in intervals:
                    if merged and start < merged[-1][1]:
                        merged[-1][1] = max(merged[-1][1], end)
                    else:
                        merged.append([start, end])
                return merged
            """,
        ],
    ),
    P(
        "spiral_order", "algorithms", "hard",
        """The items of a matrix (a list of equal-length rows) in clockwise spiral order, starting at the top left
        and going right; each item once. [] for the empty matrix.""",
        "def spiral_order(matrix: list[list[int]]) -> list[int]",
        ["spiral_order([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == [1, 2, 3, 6, 9, 8, 7, 4, 5]", "spiral_order([]) == []"],
        [
            "spiral_order([[1]]) == [1]",
            "spiral_order([[1, 2], [3, 4]]) == [1, 2, 4, 3]",
            "spiral_order([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]) == [1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7]",
            "spiral_order([[1], [2], [3]]) == [1, 2, 3]",
            "spiral_order([[1, 2, 3]]) == [1, 2, 3]",
            "spiral_order([[1, 2], [3, 4], [5, 6]]) == [1, 2, 4, 6, 5, 3]",
        ],
        """
        def spiral_order(matrix: list[list[int]]) -> list[int]:
            out = []
            rows = [list(row) for row in matrix]
            while rows:
                out.extend(rows.pop(0))
                rows = [list(row) for row in zip(*rows)][::-1]
            return out
        """,
        [
            """
            def spiral_order(matrix: list[list[int]]) -> list[int]:
                return [x for row in matrix for x in row]
            """,
            """
            def spiral_order(matrix: list[list[int]]) -> list[int]:
                if not matrix:
                    return []
                out = []
                top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
                while top <= bottom and left <= right:
                    for c in range(left, right + 1):
                        out.append(matrix[top][c])
                    for r in range(top + 1, bottom + 1):
                        out.append(matrix[r][right])
                    for c in range(right - 1, left - 1, -1):
                        out.append(matrix[bottom][c])
                    for r in range(bottom - 1, top, -1):
                        out.append(matrix[r][left])
                    top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
                return out
            """,
        ],
    ),
    P(
        "edit_distance", "algorithms", "hard",
        """The Levenshtein distance between two strings: the fewest single-character insertions, deletions and
        substitutions that turn a into b.""",
        "def edit_distance(a: str, b: str) -> int",
        ["edit_distance('kitten', 'sitting') == 3", "edit_distance('', 'abc') == 3"],
        [
            "edit_distance('abc', 'abc') == 0",
            "edit_distance('flaw', 'lawn') == 2",
            "edit_distance('a', '') == 1",
            "edit_distance('intention', 'execution') == 5",
            "edit_distance('ab', 'ba') == 2",
            "edit_distance('', '') == 0",
        ],
        """
        def edit_distance(a: str, b: str) -> int:
            previous = list(range(len(b) + 1))
            for i, x in enumerate(a, 1):
                current = [i]
                for j, y in enumerate(b, 1):
                    current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
                previous = current
            return previous[-1]
        """,
        [
            """
            def edit_distance(a: str, b: str) -> int:
                lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
                for i, x in enumerate(a, 1):
                    for j, y in enumerate(b, 1):
                        lcs[i][j] = lcs[i - 1][j - 1] + 1 if x == y else max(lcs[i - 1][j], lcs[i][j - 1])
                return len(a) + len(b) - 2 * lcs[-1][-1]
            """,
            """
            def edit_distance(a: str, b: str) -> int:
                return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
            """,
        ],
    ),
]  # fmt: skip
