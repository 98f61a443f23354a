// C++ allocations go through operator new/delete (libc++), which call malloc
// and free: the memory checker tracks them. argv[1] = "uaf" deletes an
// object and then reads it; anything else is correct.
#include <cstdio>
#include <cstring>
#include <vector>

struct Node {
    int value;
    Node *next;
};

volatile int sink;

int main(int argc, char **argv) {
    bool uaf = argc > 1 && !std::strcmp(argv[1], "uaf");
    std::vector<Node *> nodes;
    for (int i = 0; i < 8; i++)
        nodes.push_back(new Node{i, nullptr});
    int *arr = new int[16]();
    arr[15] = 7;
    delete[] arr;
    Node *victim = nodes[3];
    delete victim;
    if (uaf)
        sink = victim->value;
    nodes[3] = nullptr;
    for (Node *n : nodes)
        delete n;
    std::puts("ok");
    return 0;
}
