/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The program each layer is linked into whole, with only the layers below it (src/meson.build): a call
 * from a layer into one above it leaves a symbol undefined, and the link fails. */
int main(void)
{
        return 0;
}
