#include <fido.h>
#include <fido/es256.h>
