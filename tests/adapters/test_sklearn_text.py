"""featurehash.sklearn on text: HashingFeatures equals HashingVectorizer in the compatibility mode and needs no
fit; GCWS and binning with `text` take raw documents in a Pipeline; string-input tags; errors name parameters."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer, TfidfVectorizer
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC
from sklearn.utils import get_tags

from featurehash import InputError, SpecError, create_map
from featurehash.maps.base import EMPTY_CODE
from featurehash.sklearn import (GCWSFeatures, HashingFeatures, NormalizedRandomFourierFeatures,
                                 RandomBinningFeatures)

TOPICS = {0: "the cat sat on the mat and the kitten purred while the old cat slept by the warm fire",
          1: "stock prices fell sharply as the market closed and investors sold shares of the bank"}


def labelled_documents(n: int = 60, seed: int = 0):
    """Two topics; each document is 10 words of its topic's sentence plus 2 words of the other's."""
    rng = np.random.default_rng(seed)
    words = {label: text.split() for label, text in TOPICS.items()}
    labels = rng.integers(0, 2, size=n)
    documents = [" ".join([*rng.choice(words[label], 10), *rng.choice(words[1 - label], 2)]) for label in labels]
    return documents, labels


def test_hashing_features_equal_hashing_vectorizer_without_fit():
    documents, _ = labelled_documents()
    settings = {"ngram_range": (1, 2), "norm": "l1", "alternate_sign": False, "n_features": 2**10}
    theirs = HashingVectorizer(**settings).transform(documents)
    ours = HashingFeatures(hash="sklearn", ngram_range=(1, 2), norm="l1", alternate_sign=False,
                           n_components=2**10).transform(documents)   # stateless: no fit
    assert sp.isspmatrix_csr(ours) and ours.dtype == np.float64 and (ours != theirs).nnz == 0
    unnormalised = HashingFeatures(hash="sklearn", norm=None, dtype=np.float32).fit_transform(documents)
    assert unnormalised.dtype == np.float32
    assert (unnormalised != HashingVectorizer(norm=None, dtype=np.float32).transform(documents)).nnz == 0


def test_hashing_features_take_series_arrays_tokens_and_weights_and_equal_the_spec():
    pd = pytest.importorskip("pandas")
    documents, _ = labelled_documents(10)
    estimator = HashingFeatures(n_components=256, random_state=5).fit(documents)
    assert estimator.spec_["seed"] == 5 and estimator.get_feature_names_out()[0] == "hashingfeatures0"
    expected = create_map(estimator.spec_).transform(documents, dtype=np.float64)
    for batch in (pd.Series(documents), np.array(documents, dtype=object), tuple(documents)):
        assert (estimator.transform(batch) != expected).nnz == 0
    tokens = [document.split() for document in documents]
    weighted = [{token: 2.0 for token in row} for row in tokens]
    assert estimator.transform(tokens).shape == estimator.transform(weighted).shape == (10, 256)
    restored = pickle.loads(pickle.dumps(estimator))
    assert (restored.transform(documents) != expected).nnz == 0
    assert (clone(estimator).set_params(random_state=6).transform(documents) != expected).nnz > 0


def test_text_estimators_have_string_input_tags_and_numeric_ones_keep_theirs():
    for estimator in (HashingFeatures(), GCWSFeatures(text={}), RandomBinningFeatures(text={})):
        tags = get_tags(estimator)
        assert tags.input_tags.string and not tags.input_tags.two_d_array
    assert not get_tags(HashingFeatures()).requires_fit
    numeric = get_tags(GCWSFeatures())
    assert numeric.input_tags.two_d_array and not numeric.input_tags.string


def test_gcws_on_raw_documents_in_a_pipeline_learns_the_topics():
    documents, labels = labelled_documents(80)
    pipeline = make_pipeline(GCWSFeatures(n_components=128, bits=4, sampler="dart", random_state=0,
                                          text={"weighting": "binary"}), LinearSVC())
    assert cross_val_score(pipeline, documents, labels, cv=4).mean() > 0.9
    fitted = pipeline.fit(documents, labels)[0]
    assert fitted.spec_["input"]["hashing"]["weighting"] == "binary" and not hasattr(fitted, "n_features_in_")
    feature_map = create_map(fitted.spec_)
    np.testing.assert_array_equal(fitted.hash(documents), feature_map.hash(documents))
    assert (fitted.transform(documents) != feature_map.transform(documents).to_csr(np.float64)).nnz == 0
    binning = RandomBinningFeatures(n_components=16, gamma=0.1, text={}, random_state=1).fit(documents)
    assert binning.transform(documents).shape == (80, 16 << 8) and binning.hash(documents).shape == (80, 16)


def test_bag_of_words_with_empty_documents_in_a_pipeline():
    """CountVectorizer gives an empty document (or one of punctuation only) an all-zero row: GCWS gives it the
    reserved code (empty_rows="code", the default), NRFF after tf-idf the zero vector; "error" names the rows."""
    documents, labels = labelled_documents(40)
    documents[3], documents[17] = "", "!?"
    pipeline = make_pipeline(CountVectorizer(), GCWSFeatures(n_components=64, bits=4, random_state=0), LinearSVC())
    assert pipeline.fit(documents, labels).score(documents, labels) > 0.9
    counts = pipeline[0].transform(documents)
    codes = pipeline[1].hash(counts)
    assert (codes[[3, 17]] == EMPTY_CODE).all() and (codes[[0, 1, 2]] != EMPTY_CODE).all()
    assert pipeline.predict(["", "the cat sat"]).shape == (2,)
    text_gcws = GCWSFeatures(n_components=64, random_state=0, text={}).fit(documents)
    np.testing.assert_array_equal(text_gcws.hash(["", "the cat sat"])[0], EMPTY_CODE)
    dense = make_pipeline(TfidfVectorizer(), NormalizedRandomFourierFeatures(n_components=64, random_state=0),
                          LinearSVC()).fit(documents, labels)
    assert not dense[:2].transform(["!?"]).any()
    with pytest.raises(InputError, match=r"row\(s\) 3, 17"):
        make_pipeline(CountVectorizer(), GCWSFeatures(empty_rows="error")).fit_transform(documents)


def test_text_errors_name_the_estimator_parameter():
    documents, _ = labelled_documents(4)
    for text, field in (({"ngram_range": (0, 1)}, "text.ngram_range"), ({"alternate_sign": True},
                        "text.alternate_sign"), ({"shingles": 3}, "text.shingles"), ("word", "text")):
        with pytest.raises(SpecError) as caught:
            GCWSFeatures(text=text).fit(documents)
        assert caught.value.field == field and "GCWSFeatures" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        HashingFeatures(random_state=None).transform(documents)
    assert caught.value.field == "random_state"
    with pytest.raises(SpecError) as caught:
        HashingFeatures(analyzer="sentence").fit(documents)
    assert caught.value.field == "analyzer"
    with pytest.raises(ValueError, match="string object received"):
        HashingFeatures().transform("one document")
