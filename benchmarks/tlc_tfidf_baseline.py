"""The TLC reference baseline: character 1–3-gram TF-IDF + logistic regression (C=10).

    python benchmarks/tlc_tfidf_baseline.py --data=WYWEB/tlc

Prints dev accuracy for periods and dynasties, to sit beside the fine-tuned models' numbers in
docs/benchmarks.md (results.json's linear_baseline is wyjax's own, over the model's tokens).
"""

import argparse

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from wyjax.tasks import wyweb_files


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--data", required=True, help="a TLC task folder (train and dev files)")
  args = parser.parse_args()
  train, dev = (wyweb_files.read_split("tlc", args.data, split) for split in ("train", "dev"))
  vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(1, 3))
  x_train = vectorizer.fit_transform([e.text for e in train])
  x_dev = vectorizer.transform([e.text for e in dev])
  for field in ("period", "dynasty"):
    model = LogisticRegression(C=10, max_iter=2000).fit(x_train, [getattr(e, field) for e in train])
    accuracy = (model.predict(x_dev) == [getattr(e, field) for e in dev]).mean()
    print(f"{field}: dev accuracy {accuracy:.3f} ({len(train)} train, {len(dev)} dev)")


if __name__ == "__main__":
  main()
