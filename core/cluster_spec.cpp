#include "cluster_spec.h"
