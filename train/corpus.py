"""KJV corpus from the Debian packages bible-kjv-text (data) and bible-kjv (its reader).

The text is the `bible` program's output for Gen 1:1 - Rev 22:21 with the verse numbers
removed and wrapped lines joined: per chapter a heading line ("Genesis 1"), then one verse per
line, chapters separated by a blank line. Chapters are split deterministically into train and
validation: every 50th chapter (index % 50 == 7) is held out.
"""
import re
import subprocess

VAL_EVERY = 50
VAL_OFFSET = 7


def read_bible():
    """Returns the list of chapters, each (heading, [verse, ...])."""
    raw = subprocess.run(["bible", "gen1:1-rev22:21"], check=True, capture_output=True,
                         env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"}).stdout.decode("utf-8")
    chapters = []
    verse_re = re.compile(r"^\s+(\d+) (.*)$")
    for line in raw.split("\n"):
        if not line.strip():
            continue
        m = verse_re.match(line)
        if m:
            chapters[-1][1].append(m.group(2).strip())
        elif not line.startswith(" ") and re.match(r"^[1-3A-Z][A-Za-z ]* \d+$", line.strip()) \
                and (not chapters or chapters[-1][1]):
            chapters.append((line.strip(), []))
        else:  # continuation of a wrapped verse
            chapters[-1][1][-1] += " " + line.strip()
    return chapters


def chapter_text(heading, verses):
    return heading + "\n" + "\n".join(verses) + "\n\n"


def split_texts():
    """(train_text, val_text)."""
    train, val = [], []
    for i, (h, v) in enumerate(read_bible()):
        (val if i % VAL_EVERY == VAL_OFFSET else train).append(chapter_text(h, v))
    return "".join(train), "".join(val)


if __name__ == "__main__":
    tr, va = split_texts()
    ch = read_bible()
    print(f"{len(ch)} chapters, {sum(len(v) for _, v in ch)} verses, train {len(tr)} chars, "
          f"val {len(va)} chars")
    print(tr[:400])
