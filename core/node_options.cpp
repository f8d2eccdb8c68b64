#include "node_options.h"
