"""
Kernel approximation error against the number of features
==========================================================

How close `Z @ Z.T` comes to the exact Gaussian kernel on the digits data set, for random Fourier features
(i.i.d. and orthogonal frequencies), spherical structured features and a Nyström map fitted to 300 rows,
at D = 128, 256 and 1024 features. The relative Frobenius error is printed per map and D: it falls like 1/sqrt(D)
for the random maps, faster for the fitted one on data like the rows it was fitted to.
"""

import numpy as np
from sklearn.datasets import load_digits

from featurehash import create_map

X = load_digits().data[:600] / 16.0
gamma = 1.0 / np.median(((X[:, None, :] - X[None, :200, :]) ** 2).sum(-1))
specs = {
    "rff (iid)": lambda D: {"method": "rff", "params": {"gamma": gamma}},
    "rff (orthogonal)": lambda D: {"method": "rff", "params": {"gamma": gamma, "frequencies": "orthogonal"}},
    "ssf": lambda D: {"method": "ssf", "params": {"gamma": gamma}},
    "nystroem": lambda D: {"method": "nystroem", "params": {"gamma": gamma, "fit_sample": X[:300]}},
}
K = create_map({"method": "rff", "input_dim": 64, "n_components": 2, "seed": 1,
                "params": {"gamma": gamma}}).exact_kernel(X, X)
print(f"{'map':18s}" + "".join(f"{'D = ' + str(D):>11s}" for D in (128, 256, 1024)))
for name, spec in specs.items():
    errors = []
    for D in (128, 256, 1024):
        m = create_map({"input_dim": 64, "n_components": D, "seed": 1, **spec(D)})
        Z = m.transform(X, dtype=np.float64)
        errors.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
    print(f"{name:18s}" + "".join(f"{e:11.4f}" for e in errors))
