"""The passages the quality gate asks a lane to copy verbatim (core/qualify.py).

About 300 words each, in two scripts: the seeds' probe is a 300-word Russian
text (the r37 garbling showed as ~30 close-vocabulary typos there, e.g.
"маштабировать", "упровляемой"), and an English one catches damage that only
shows in Latin script. Plain prose on purpose: the words a garbling engine
breaks are common ones, not rare names. Changing a passage changes every CER
ever journaled against it: add a new one instead.
"""

from __future__ import annotations

EN = (
    "The night shift begins when the last engineer leaves the building and the cluster is "
    "handed over to a single operator. Eight small machines stand on two shelves in the "
    "server room, each with one graphics processor and one hundred and twenty eight "
    "gigabytes of unified memory. Together they serve large language models to the people "
    "who will arrive in the morning, and every boot must be watched, because a model that "
    "loads for forty minutes can still fail in the last second. The operator keeps a "
    "console open on the second monitor. It shows which nodes answer, how much memory is "
    "left on each of them, which lane is loading its weights and how long the load will "
    "take. When a node stops answering the secure shell but still replies to ping, the "
    "console says so at once, because that is the signature of memory thrashing, and a "
    "thrashing machine can take half an hour to recover by itself. Before a new lane is "
    "trusted, it is asked to copy a long passage of text exactly, character by character, "
    "and to return a handful of identifiers without changing a single digit. A lane that "
    "boots, answers health checks and streams tokens can still corrupt its output in "
    "subtle ways, replacing one letter with another that looks almost the same. Only a "
    "careful comparison with the original text reveals the damage. The operator also "
    "measures how quickly the lane produces its first token and how many tokens it decodes "
    "per second, and compares both figures with the numbers recorded when the recipe was "
    "qualified. If the figures agree and the copy is clean, the lane is marked as qualified "
    "and the operator writes one line into the shift log. If not, the evidence goes into a "
    "bug report, and the lane stays off the production list until the cause is found and "
    "fixed. The same routine is repeated after every boot, even when nothing in the recipe "
    "has changed, because images, drivers and kernels move underneath it."
)

RU = (
    "Ночная смена начинается, когда последний инженер уходит из здания и кластер переходит "
    "под наблюдение одного оператора. В серверной на двух полках стоят восемь небольших "
    "машин, у каждой один графический процессор и сто двадцать восемь гигабайт общей "
    "памяти. Вместе они обслуживают большие языковые модели для людей, которые придут "
    "утром, и за каждой загрузкой нужно следить, потому что модель, которая грузится сорок "
    "минут, может упасть в последнюю секунду. Оператор держит консоль открытой на втором "
    "мониторе. Она показывает, какие узлы отвечают, сколько памяти осталось на каждом из "
    "них, какая линия загружает веса и сколько ещё продлится загрузка. Когда узел "
    "перестаёт отвечать по защищённой оболочке, но всё ещё отвечает на пинг, консоль сразу "
    "сообщает об этом, потому что это признак нехватки памяти, а такая машина может "
    "восстанавливаться сама по себе полчаса. Прежде чем доверять новой линии, её просят "
    "точно, символ за символом, переписать длинный текст и вернуть несколько "
    "идентификаторов, не изменив ни одной цифры. Линия, которая загрузилась, отвечает на "
    "проверки и выдаёт токены, всё равно может незаметно портить свой ответ, заменяя одну "
    "букву другой, очень похожей. Только внимательное сравнение с исходным текстом "
    "показывает такие повреждения. Оператор также измеряет, как быстро линия выдаёт первый "
    "токен и сколько токенов в секунду она декодирует, и сравнивает оба числа с теми, что "
    "были записаны при проверке рецепта. Если числа совпадают и копия чистая, линия "
    "считается проверенной, и оператор пишет одну строку в журнал смены. Если нет, "
    "доказательства уходят в отчёт об ошибке, а линия остаётся вне рабочего списка, пока "
    "причину не найдут и не исправят. Такой порядок помогает масштабировать работу и "
    "держать кластер управляемой системой: параметры каждой модели, её тензоры и настройки "
    "обслуживания записаны заранее, и любое отклонение видно сразу. Утром дневная смена "
    "читает журнал и сразу видит, какие линии готовы к работе, а какие ещё требуют "
    "внимания и новой проверки."
)

PASSAGES: dict[str, str] = {"RU": RU, "EN": EN}
"""Label (as the shift log writes it) -> passage; the seeds' Russian probe first."""
