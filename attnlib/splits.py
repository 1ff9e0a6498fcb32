"""Real data as split token sequences: what every split data set shares, the stratified split,
and scikit-learn's handwritten digits as patch tokens.

The digits are scikit-learn's bundled 8×8 images (``sklearn.datasets.load_digits``: 1,797
images, shipped inside the scikit-learn wheel, nothing downloaded). Each image becomes a
sequence of T = 16 tokens: its non-overlapping 2×2 patches (4 pixel values in [0, 1]) with a
one-hot position appended, so d = 20; Y = +1 for the digits 5-9 and Y = -1 for 0-4.
:mod:`attnlib.realdata` trains the book's attention classifier on them and
:mod:`attnlib.text` builds sentences with the same split views.

See chapter 10, "Mirror descent on real data".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ._validate import seed as check_seed

__all__ = ["SplitViews", "DigitSplits", "split_indices", "digits_tokens"]


class SplitViews:
    """What every split data set of real data shares (digits, sentences): ``T`` and ``d``
    of ``X`` (n, T, d), and ``part``, the ``(X, Y, z)`` of one split named in ``index``."""

    @property
    def T(self) -> int:
        return self.X.shape[1]

    @property
    def d(self) -> int:
        return self.X.shape[2]

    def part(self, name: str):
        """``(X, Y, z)`` of one split: ``"train"``, ``"val"`` or ``"test"``."""
        if name not in self.index:
            raise ValueError(f"name must be one of {sorted(self.index)}, got {name!r}")
        i = self.index[name]
        return self.X[i], self.Y[i], self.z[i]


@dataclass(frozen=True)
class DigitSplits(SplitViews):
    """Digits as token sequences, with a train/validation/test split.

    Attributes
    ----------
    X : Tensor (N, T, d)
        All images as tokens (2×2 patches + one-hot position).
    Y : Tensor (N,)
        Labels in {-1, +1} (+1 for the digits 5-9).
    z : Tensor (N, d)
        Query tokens (the mean token of each image, or the CLS token).
    digit : Tensor (N,)
        The original digit 0-9.
    index : dict of str to Tensor
        Integer indices of the ``"train"``, ``"val"`` and ``"test"`` samples (disjoint).
    """

    X: torch.Tensor
    Y: torch.Tensor
    z: torch.Tensor
    digit: torch.Tensor
    index: dict = field(default_factory=dict)


def split_indices(labels, fractions=(0.5, 0.25, 0.25), seed=0) -> dict:
    """Stratified train/validation/test indices (disjoint, covering every sample).

    Parameters
    ----------
    labels : array-like (N,)
        Class of each sample; every class is split in the same proportions.
    fractions : tuple of 3 floats
        Shares of train, validation and test; positive, summing to 1.
    seed : int
        Seed of the permutation (a ``torch.Generator`` on CPU).
    """
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions must be 3 positive numbers summing to 1, got {fractions}")
    labels = torch.as_tensor(labels).cpu()
    gen = torch.Generator().manual_seed(check_seed(seed))
    parts = {"train": [], "val": [], "test": []}
    for c in torch.unique(labels):
        idx = torch.nonzero(labels == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=gen)]
        n_tr = round(fractions[0] * len(idx))
        n_va = round(fractions[1] * len(idx))
        parts["train"].append(idx[:n_tr])
        parts["val"].append(idx[n_tr:n_tr + n_va])
        parts["test"].append(idx[n_tr + n_va:])
    return {k: torch.sort(torch.cat(v)).values for k, v in parts.items()}


def digits_tokens(patch: int = 2, query: str = "mean", fractions=(0.5, 0.25, 0.25),
                  split_seed: int = 0, device=None, dtype=torch.float32) -> DigitSplits:
    """scikit-learn's digits as patch tokens, split into train/validation/test.

    Parameters
    ----------
    patch : int
        Side of the square patches (2 or 4); ``T = (8/patch)^2`` tokens of ``patch^2`` pixels,
        plus a one-hot position, so ``d = patch^2 + T``.
    query : {"mean", "cls"}
        ``"mean"``: z_i is the mean token of image i (exercises all of W). ``"cls"``: a constant
        CLS token with its own indicator coordinate is prepended (T+1 tokens, d+1 features)
        and z_i is that token, the [CLS] read-out of the paper's IMDb model.
    fractions, split_seed
        Passed to :func:`split_indices` (stratified by digit).
    """
    if patch not in (2, 4):
        raise ValueError(f"patch must be 2 or 4, got {patch!r}")
    if query not in ("mean", "cls"):
        raise ValueError(f"query must be 'mean' or 'cls', got {query!r}")
    from sklearn.datasets import load_digits  # bundled with scikit-learn: no download

    raw = load_digits()
    img = torch.as_tensor(raw.images, dtype=dtype) / 16.0  # (N, 8, 8) in [0, 1]
    N, k = img.shape[0], 8 // patch
    pix = img.reshape(N, k, patch, k, patch).permute(0, 1, 3, 2, 4).reshape(N, k * k, -1)
    T = k * k
    pos = torch.eye(T, dtype=dtype).expand(N, T, T)
    X = torch.cat([pix, pos], dim=-1)  # (N, T, patch^2 + T)
    if query == "cls":
        X = torch.cat([torch.zeros(N, T, 1, dtype=dtype), X], dim=-1)
        cls = torch.zeros(N, 1, X.shape[-1], dtype=dtype)
        cls[..., 0] = 1.0
        X = torch.cat([cls, X], dim=1)
        z = X[:, 0]
    else:
        z = X.mean(dim=1)
    digit = torch.as_tensor(raw.target)
    Y = torch.where(digit >= 5, 1.0, -1.0).to(dtype)
    index = split_indices(digit, fractions, split_seed)
    dev = torch.device(device) if device is not None else None
    return DigitSplits(X=X.to(dev), Y=Y.to(dev), z=z.to(dev), digit=digit.to(dev),
                       index={k: v.to(dev) for k, v in index.items()})
