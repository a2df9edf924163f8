/* Links against an installed lowp and encodes one value: 464 -> E4M3 0x7E (CUDA satfinite). */
#include <lowp/format.h>
#include <stdio.h>

int main(void)
{
    lowp_codec c;
    char why[128];
    if (lowp_codec_init(&c, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT, why, sizeof why))
        return 1;
    unsigned code = lowp_encode_f32(&c, 464.0f);
    printf("0x%02x\n", code);
    return code == 0x7e ? 0 : 1;
}
