/* tc_compile_error.c — does not compile: uses an undeclared identifier. */
int main(void) {
    return tc_undeclared_identifier;
}
