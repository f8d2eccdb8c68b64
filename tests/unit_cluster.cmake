# Cluster spec, node flags and checkpoints (included from tests/CMakeLists.txt).
parasync_add_test(tst_cluster_spec tst_cluster_spec.cpp)
parasync_add_test(tst_node_options tst_node_options.cpp)
parasync_add_test(tst_checkpoint tst_checkpoint.cpp)
