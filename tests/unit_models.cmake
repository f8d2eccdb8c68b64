# Unit tests of the models, datasets and optimizers; included from tests/CMakeLists.txt.
parasync_add_test(tst_models tst_models.cpp)
parasync_add_test(tst_datasets tst_datasets.cpp)
parasync_add_test(tst_optimizers tst_optimizers.cpp)
