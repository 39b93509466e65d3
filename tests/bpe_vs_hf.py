#!/usr/bin/env python3
"""The gpt2:DIR tokenizer against Hugging Face `tokenizers`, id for id.

    bpe_vs_hf.py TOPSPIN_BINARY

1. Trains a byte-level BPE (vocabulary 2000, "<|endoftext|>" special) with
   tokenizers' own BpeTrainer on the licence texts every Debian system
   ships (/usr/share/common-licenses, from the Essential package
   base-files: 14 ASCII files, 237 KB) plus a multilingual edge-case text,
   saves vocab.json and merges.txt (tokenizer.model.save), and encodes with
   Hugging Face (BPE.from_file, ByteLevel(add_prefix_space=False)) and with
   `topspin tokenizer encode --tokenizer gpt2:DIR`: every licence text,
   GPL-3 with \r\n line ends, and the edge cases (composed and decomposed
   accents, CJK, emoji with skin tones and ZWJ sequences, Arabic and
   Hebrew, combining marks, tabs, \r\n, runs of spaces, trailing spaces,
   contractions 's 't 're 've 'm 'll 'd and 'S, digits of other scripts,
   U+00A0, U+3000, zero-width characters, the text "<|endoftext|>").
2. Sweeps the pre-tokenization pattern over every code point c of planes
   0-3 and 14 (and samples of the others): the probe lines
   "a{c}\n1{c}\n!{c}\n", encoded with a made-up vocabulary whose only
   merges are "a"+byte, "1"+byte and "!"+byte. A merge happens only inside
   a piece, so the ids show whether the pattern takes c for a letter (it
   joins "a"), a digit (joins "1"), neither (joins "!") or a space (joins
   none). With the trained vocabulary the pieces would hardly show: no
   merge spans a rare character.

The ids must be equal, and `topspin tokenizer decode` (and Hugging Face's
decoder) must give the document's bytes back. One difference is expected
and reported, not hidden: PCRE2 (Debian 12: 10.42) has Unicode 14 tables,
Hugging Face's Oniguruma newer ones, so letters and digits assigned after
Unicode 14 (CJK extension H, Kawi, Garay, ...) are "neither" to topspin.
Probes may differ only for code points that Python's unicodedata (Unicode
14 in Debian 12's Python 3.11, as PCRE2) calls unassigned.
Exit 0 when all agree, 1 listing the differences otherwise.
"""

import json
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

try:
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    sys.exit("bpe_vs_hf.py: no Hugging Face tokenizers module in " + sys.executable +
             "; run scripts/install-deps.sh")

LICENSES = Path("/usr/share/common-licenses")
VOCAB_SIZE = 2000

EDGE_CASES = "\n".join([
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 vs Cafe\u0301 nai\u0308ve re\u0301sume\u0301 "
    "(composed, decomposed)",
    "\u00c5ngstr\u00f6m \u212bngstr\u00f6m A\u030angstro\u0308m \u1e9b\u0323 q\u0307\u0323",
    "\u4e2d\u6587\u6587\u672c\uff0c\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002"
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "emoji \U0001f600\U0001f44d\U0001f3fd "
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 "
    "\U0001f3f3\ufe0f\u200d\U0001f308 \u2764\ufe0f \U0001f1e9\U0001f1ea "
    "\U0001f9d1\U0001f3ff\u200d\U0001f4bb",
    "\u0627\u0644\u0633\u0644\u0627\u0645 \u0639\u0644\u064a\u0643\u0645 "
    "\u0645\u0631\u062d\u0628\u0627\u064b \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd "
    "\u202bRTL\u202c \u200fmark\u200e",
    "combining: a\u0300\u0301\u0302 \u0915\u094d\u0937 \u0e01\u0e33 "
    "Z\u0351\u036b\u0343\u036a\u0302\u036b",
    "tabs\tand\t\ttabs\t \t|\r\nCRLF line\r\n\r\nblank CRLF\rlone CR\x0bVT\x0cFF",
    "runs:  two   three    four     five\u00a0nbsp \u00a0 \u3000ideographic\u3000\u3000space",
    "zero width: a\u200bb c\u200cd e\u200df \ufeffBOM g\u2060h \u180emvs\u180e "
    "\u2028LS\u2029PS \x85NEL",
    "contractions: it's isn't they're we've I'm you'll he'd IT'S ISN'T THEY'RE I'M 'S 'T ''s 's's",
    "numbers: 0123456789 3.14159 1,000,000 \u0663\u0664\u0665 \u06f1\u06f2 \u0967\u0968 "
    "\uff13\uff14 \u2460\u2461 \u00bd \u2167 \u4e09 x\u00b2 \U0001d7d9\U0001d7da",
    "punctuation: \u00ab\u00bb \u201c\u201d \u2014\u2013 \u2026 \u00bf\u00a1 "
    "\u300c\u300d\uff01 <<>> !!! ?!",
    "mixed: abc123def 123abc abc_def a-b a.b.c #tag @user $5 50% C++ f(x)=y\u00b2",
    "special text: <|endoftext|> and <|endoftext|><|endoftext|> inline",
    "trailing spaces   ",
    "   leading spaces",
    "",
    "",
    "end",
])


def probe_documents():
    """(name, [code points], text) for the code point sweep."""
    def ranges():
        yield "plane 0", range(0x0000, 0x10000)
        for plane in (1, 2, 3, 14):
            yield f"plane {plane}", range(plane << 16, (plane + 1) << 16)
        samples = []
        for plane in list(range(4, 14)) + [15, 16]:
            samples += list(range(plane << 16, (plane << 16) + 64))
            samples += list(range(((plane + 1) << 16) - 64, (plane + 1) << 16))
        yield "samples of planes 4-13, 15, 16", samples
    for name, cps in ranges():
        cps = [cp for cp in cps if not 0xD800 <= cp <= 0xDFFF and cp != 0x0A]
        text = "".join(f"a{chr(cp)}\n1{chr(cp)}\n!{chr(cp)}\n" for cp in cps)
        yield name, cps, text


def reference_tokenizer(model_dir):
    """Hugging Face's tokenizer from DIR/vocab.json and DIR/merges.txt. No
    special token is registered, so "<|endoftext|>" in the text is ordinary
    text, as in topspin."""
    reference = Tokenizer(models.BPE.from_file(str(model_dir / "vocab.json"),
                                               str(model_dir / "merges.txt")))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    reference.decoder = decoders.ByteLevel()
    return reference


def train(workdir):
    """The trained tokenizer, its reference from the saved files, their
    directory and the licence files."""
    corpus = workdir / "edge-cases.txt"
    corpus.write_text((EDGE_CASES + "\n") * 20, encoding="utf-8")
    files = [str(p) for p in sorted(LICENSES.iterdir()) if p.is_file() and not p.is_symlink()]
    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trained.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    trained.train(files + [str(corpus)], trainer)
    model_dir = workdir / "gpt2"
    model_dir.mkdir()
    trained.model.save(str(model_dir))
    return trained, reference_tokenizer(model_dir), model_dir, files


def write_probe_vocabulary(model_dir):
    """Byte tokens (GPT-2's bytes_to_unicode), then "a"+byte, "1"+byte and
    "!"+byte for every byte; returns its reference tokenizer."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + n) for n, b in enumerate(b for b in range(256) if b not in table)})
    tokens = [table[b] for b in range(256)]
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for first in "a1!":
        for t in tokens:
            merges.append(f"{first} {t}")
            vocab.setdefault(first + t, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    model_dir.mkdir()
    (model_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (model_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n",
                                          encoding="utf-8")
    return reference_tokenizer(model_dir)


def topspin(binary, args):
    done = subprocess.run([binary] + args, capture_output=True)
    if done.returncode != 0:
        sys.exit(f"bpe_vs_hf.py: topspin {' '.join(args)} failed ({done.returncode}): "
                 + done.stderr.decode(errors="replace"))
    return done.stdout


def split_lines(ids, newline):
    lines, line = [], []
    for t in ids:
        if t == newline:
            lines.append(line)
            line = []
        else:
            line.append(t)
    return lines


class Check:
    """Documents encoded by topspin and by Hugging Face, with one vocabulary."""

    def __init__(self, binary, model_dir, reference, workdir):
        self.binary, self.reference, self.workdir = binary, reference, workdir
        self.spec = f"gpt2:{model_dir}"
        self.documents = self.tokens = 0
        self.failures = []

    def encode_both(self, name, text):
        """Both id lists; checks that both decode back to the text."""
        path = self.workdir / "doc.txt"
        path.write_bytes(text.encode("utf-8"))
        ours = json.loads(topspin(self.binary, ["tokenizer", "encode", "--tokenizer", self.spec,
                                                "--json", str(path)]))
        theirs = self.reference.encode(text).ids
        ids = self.workdir / "ids.txt"
        ids.write_text(" ".join(map(str, ours)))
        decoded = topspin(self.binary, ["tokenizer", "decode", "--tokenizer", self.spec, str(ids)])
        if decoded != text.encode("utf-8"):
            self.failures.append(f"{name}: topspin tokenizer decode does not give the text back")
        if self.reference.decode(theirs) != text:
            self.failures.append(f"{name}: Hugging Face's decode does not give the text back")
        self.documents += 1
        self.tokens += len(theirs)
        return ours, theirs

    def document(self, name, text):
        ours, theirs = self.encode_both(name, text)
        if ours != theirs:
            i = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                     min(len(ours), len(theirs)))
            show = lambda ids: [self.reference.id_to_token(t) for t in ids[max(0, i - 3):i + 4]]
            self.failures.append(f"{name}: {len(ours)} ids vs {len(theirs)}; first difference at "
                                 f"token {i}: topspin {show(ours)}, Hugging Face {show(theirs)}")

    def probes(self, name, cps, text):
        """The code points whose three probe lines differ."""
        ours, theirs = self.encode_both(name, text)
        newline = self.reference.token_to_id("\u010a")  # "Ċ", byte 0x0A
        ours, theirs = split_lines(ours, newline), split_lines(theirs, newline)
        if len(ours) != 3 * len(cps) or len(theirs) != 3 * len(cps):
            self.failures.append(f"{name}: {len(ours)} and {len(theirs)} probe lines for "
                                 f"{len(cps)} code points")
            return []
        return [cp for k, cp in enumerate(cps) if ours[3 * k:3 * k + 3] != theirs[3 * k:3 * k + 3]]


def compare_texts(binary, workdir):
    trained, reference, model_dir, files = train(workdir)
    check = Check(binary, model_dir, reference, workdir)
    texts = [(Path(f).name, Path(f).read_text(encoding="utf-8")) for f in files]
    texts.append(("GPL-3 with CRLF", (LICENSES / "GPL-3").read_text().replace("\n", "\r\n")))
    texts.append(("edge cases", EDGE_CASES))
    for name, text in texts:
        check.document(name, text)
        # The trained tokenizer (special token registered) agrees with its
        # saved files where the text lacks the special token's string.
        if "<|endoftext|>" not in text and trained.encode(text).ids != reference.encode(text).ids:
            check.failures.append(f"{name}: the trained tokenizer and its saved files disagree")
    print(f"bpe_vs_hf: tokenizers {tokenizers.__version__}; vocabulary of "
          f"{trained.get_vocab_size()} trained on the {len(files)} files of {LICENSES} and the "
          f"edge cases")
    print(f"bpe_vs_hf: {check.documents} documents, {check.tokens} tokens compared")
    return check


def compare_probes(binary, workdir):
    probe = Check(binary, workdir / "probe", write_probe_vocabulary(workdir / "probe"), workdir)
    probed, newer = 0, []
    for name, cps, text in probe_documents():
        for cp in probe.probes(name, cps, text):
            c = chr(cp)
            if unicodedata.category(c) == "Cn":
                newer.append(cp)
            else:
                probe.failures.append(
                    f"U+{cp:04X} {unicodedata.name(c, '')} ({unicodedata.category(c)} in Unicode "
                    f"{unicodedata.unidata_version}): its probe lines differ")
        probed += len(cps)
    print(f"bpe_vs_hf: {probed} code points probed ({probe.documents} documents, "
          f"{probe.tokens} tokens)")
    if newer:
        print(f"bpe_vs_hf: {len(newer)} code points unassigned in Unicode "
              f"{unicodedata.unidata_version} (PCRE2's tables) are letters or digits to Hugging "
              f"Face (newer tables), so they split differently: "
              + " ".join(f"U+{cp:04X}" for cp in newer[:5])
              + " ... (expected: see tests/bpe_vs_hf.py)")
    return probe


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory(prefix="bpe_vs_hf-") as tmp:
        checks = [compare_texts(sys.argv[1], Path(tmp)), compare_probes(sys.argv[1], Path(tmp))]
    failures = [f for check in checks for f in check.failures]
    if not any("decode" in f for f in failures):
        print(f"bpe_vs_hf: topspin tokenizer decode (and Hugging Face's decoder) gave back all "
              f"{sum(c.documents for c in checks)} documents")
    for failure in failures[:20]:
        print("bpe_vs_hf: MISMATCH " + failure)
    if failures:
        print(f"bpe_vs_hf: {len(failures)} mismatches")
        return 1
    print("bpe_vs_hf: all ids equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
