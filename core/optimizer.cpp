#include "optimizer.h"
