/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Text from callers and devices: what is printable, how the rest is shown (src/shared/util.c). */
#include "test.h"

TEST(printable_text)
{
        CHECK(text_printable(""));
        CHECK(text_printable("org.example.Daw"));
        CHECK(text_printable("Aufnahme über Nacht 🎹, 50% \\x0a"));
        CHECK(!text_printable("x\nWATCHDOG=trigger"));
        CHECK(!text_printable("tab\there"));
        CHECK(!text_printable("esc\x1b[2J"));
        CHECK(!text_printable("del\x7f"));
        CHECK(!text_printable("c1 \xc2\x85 next line"));
        CHECK(!text_printable("line \xe2\x80\xa8 separator"));
        CHECK(!text_printable("bidi \xe2\x80\xae override"));
        CHECK(!text_printable("bidi \xe2\x81\xa6 isolate"));
        CHECK(!text_printable("stray \x80 byte"));
        CHECK(!text_printable("overlong \xc0\xaf slash"));
        CHECK(!text_printable("surrogate \xed\xa0\x80"));
        CHECK(!text_printable("cut short \xe2\x82"));
        CHECK(!text_printable("beyond \xf4\x90\x80\x80"));
}

TEST(escaped_text_is_one_line)
{
        _cleanup_free_ char *a = text_escape("x\nWATCHDOG=trigger\nMAINPID=1\ny");
        _cleanup_free_ char *b = text_escape("é🎹 \x1b]0;t\x07");
        _cleanup_free_ char *c = text_escape("bad \xff and \xc2\x85");
        _cleanup_free_ char *d = text_escape("cut \xe2\x82");
        _cleanup_free_ char *e = text_escape_n("éé", 3);

        CHECK_STREQ(a, "x\\x0aWATCHDOG=trigger\\x0aMAINPID=1\\x0ay");
        CHECK_STREQ(b, "é🎹 \\x1b]0;t\\x07");
        CHECK_STREQ(c, "bad \\xff and \\xc2\\x85");
        CHECK_STREQ(d, "cut \\xe2\\x82");
        /* n cuts a character in two: its first byte is shown escaped, never half a character raw. */
        CHECK_STREQ(e, "é\\xc3");
}

/* A caller who writes a backslash cannot make text that reads as an escaped newline; a log line, which
 * may quote escaped names already, keeps its backslashes and loses only its control characters. */
TEST(escapes_cannot_be_forged)
{
        _cleanup_free_ char *a = text_escape("x\\x0aWATCHDOG=trigger");
        _cleanup_free_ char *b = text_escape_controls("comm \\x1b and \x1b[2J");

        CHECK_STREQ(a, "x\\x5cx0aWATCHDOG=trigger");
        CHECK_STREQ(b, "comm \\x1b and \\x1b[2J");
}

TEST(echoed_text_is_bounded_and_escaped)
{
        char long_text[200];
        _cleanup_free_ char *a = NULL, *b = NULL;

        memset(long_text, 'a', sizeof long_text - 1);
        long_text[sizeof long_text - 1] = '\0';
        long_text[10] = '\n';
        a = echo_text(long_text);
        CHECK(!strchr(a, '\n'));
        CHECK_CONTAINS(a, "\\x0a");
        CHECK_CONTAINS(a, "...(199 bytes)");
        b = echo_text("short\tone");
        CHECK_STREQ(b, "short\\x09one");
}

TEST(utf8_cut_keeps_characters_whole)
{
        CHECK_INTEQ(utf8_cut("abc", 10), 3);
        CHECK_INTEQ(utf8_cut("abc", 2), 2);
        CHECK_INTEQ(utf8_cut("aé", 2), 1); /* é is two bytes: cut before it */
        CHECK_INTEQ(utf8_cut("a🎹b", 4), 1);
        CHECK_INTEQ(utf8_cut("a🎹b", 5), 5);
}

TEST_MAIN(T(escapes_cannot_be_forged), T(printable_text), T(escaped_text_is_one_line),
          T(echoed_text_is_bounded_and_escaped), T(utf8_cut_keeps_characters_whole))
